#include "catalog/definition.hpp"

namespace kindex::catalog {

std::string_view source_name(Source s) {
  return s == Source::flashinfer_bench ? "flashinfer-bench" : "sol-execbench";
}

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

}  // namespace kindex::catalog
