#include "catalog/definition.hpp"

#include <algorithm>
#include <map>

namespace kindex::catalog {

std::string_view source_name(Source s) { return s == Source::flashinfer_bench ? "flashinfer-bench" : "sol-execbench"; }
int correctness_rounds(Source s) { return s == Source::flashinfer_bench ? 3 : 10; }

const Axis* Definition::axis(const std::string& n) const {
  for (const auto& [name, a] : axes)
    if (name == n) return &a;
  return nullptr;
}

const TensorSpec* Definition::input(const std::string& n) const {
  for (const auto& t : inputs)
    if (t.name == n) return &t;
  return nullptr;
}

const TensorSpec* Definition::output(const std::string& n) const {
  for (const auto& t : outputs)
    if (t.name == n) return &t;
  return nullptr;
}

namespace {

std::string describe_axis(const Axis& a) {
  switch (a.kind) {
    case Axis::Kind::constant:
      return "const " + std::to_string(a.value);
    case Axis::Kind::variable:
      return "var";
    case Axis::Kind::expression:
      return "expr " + a.expression;
  }
  return "?";
}

std::string describe_tensor(const TensorSpec& t) {
  std::string s = t.name + " " + std::string(dtype_name(t.dtype));
  if (!t.shape) return s + " scalar";
  s += " [";
  for (size_t i = 0; i < t.shape->size(); ++i) s += (i ? ", " : "") + (*t.shape)[i];
  return s + "]";
}

std::vector<std::string> describe_tensors(const std::vector<TensorSpec>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts) out.push_back(describe_tensor(t));
  return out;
}

}  // namespace

bool same_signature(const Definition& a, const Definition& b, std::string* difference) {
  auto differ = [&](const std::string& what) {
    if (difference) *difference = what;
    return false;
  };
  std::map<std::string, std::string> axes_a, axes_b;
  for (const auto& [n, x] : a.axes) axes_a[n] = describe_axis(x);
  for (const auto& [n, x] : b.axes) axes_b[n] = describe_axis(x);
  for (const auto& [n, d] : axes_a)
    if (!axes_b.count(n) || axes_b[n] != d)
      return differ("axis " + n + ": " + d + " vs " + (axes_b.count(n) ? axes_b[n] : "absent"));
  for (const auto& [n, d] : axes_b)
    if (!axes_a.count(n)) return differ("axis " + n + ": absent vs " + d);
  if (a.constraints != b.constraints) return differ("constraints differ");
  auto ia = describe_tensors(a.inputs), ib = describe_tensors(b.inputs);
  for (size_t i = 0; i < std::max(ia.size(), ib.size()); ++i)
    if (i >= ia.size() || i >= ib.size() || ia[i] != ib[i])
      return differ("input " + std::to_string(i) + ": " + (i < ia.size() ? ia[i] : "absent") + " vs " +
                    (i < ib.size() ? ib[i] : "absent"));
  auto oa = describe_tensors(a.outputs), ob = describe_tensors(b.outputs);
  for (size_t i = 0; i < std::max(oa.size(), ob.size()); ++i)
    if (i >= oa.size() || i >= ob.size() || oa[i] != ob[i])
      return differ("output " + std::to_string(i) + ": " + (i < oa.size() ? oa[i] : "absent") + " vs " +
                    (i < ob.size() ? ob[i] : "absent"));
  return true;
}

}  // namespace kindex::catalog
