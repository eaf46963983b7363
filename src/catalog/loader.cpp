#include "catalog/loader.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "catalog/constraints.hpp"
#include "catalog/page_table.hpp"
#include "core/error.hpp"

namespace kindex::catalog {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int64_t kMaxAxisValue = 2147483647;  // index tensors are int32
constexpr int kMaxDatasetDepth = 8;

std::string read_text_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string(), "", "", "cannot open file");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(file.string(), "", "", "cannot read file");
  return s.str();
}

// JSON text to an ordered object, rejecting duplicate keys (nlohmann keeps the last one silently).
// Errors name the position: "line L, column C" within `text`, prefixed by `line_prefix` for JSONL lines.
ojson parse_json(std::string_view text, const std::string& where, const std::string& line_prefix) {
  struct Frame {
    std::set<std::string> keys;
    std::string path;
  };
  std::vector<Frame> stack;
  std::string last_key, duplicate, duplicate_key;
  auto callback = [&](int, ojson::parse_event_t event, ojson& parsed) {
    switch (event) {
      case ojson::parse_event_t::object_start:
        stack.push_back(
            {{}, stack.empty() ? "" : (stack.back().path.empty() ? last_key : stack.back().path + "." + last_key)});
        break;
      case ojson::parse_event_t::object_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case ojson::parse_event_t::key:
        last_key = parsed.get<std::string>();
        if (!stack.empty() && !stack.back().keys.insert(last_key).second && duplicate.empty()) {
          duplicate = stack.back().path.empty() ? last_key : stack.back().path + "." + last_key;
          duplicate_key = last_key;
        }
        break;
      default:
        break;
    }
    return true;
  };
  ojson j;
  try {
    j = ojson::parse(text.begin(), text.end(), callback);
  } catch (const ojson::parse_error& e) {
    size_t byte = std::min<size_t>(e.byte ? e.byte - 1 : 0, text.size());
    size_t line = 1 + size_t(std::count(text.begin(), text.begin() + long(byte), '\n'));
    size_t line_start = text.rfind('\n', byte ? byte - 1 : 0);
    size_t column = byte - (line_start == std::string_view::npos || byte == 0 ? 0 : line_start + 1) + 1;
    std::string what = e.what();
    auto colon = what.find("syntax error");
    if (colon != std::string::npos) what = what.substr(colon);
    std::string position = line_prefix.empty() ? "line " + std::to_string(line) + ", column " + std::to_string(column)
                                               : line_prefix + "column " + std::to_string(byte + 1);
    // The value shown is the text around the error, on one line.
    std::string near(text.substr(byte > 12 ? byte - 12 : 0, 24));
    std::replace_if(
        near.begin(), near.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
    throw Error(where, position, near, "malformed JSON: " + what);
  } catch (const ojson::exception& e) {  // e.g. a number too large to represent
    throw Error(where, line_prefix + "JSON", "", std::string("malformed JSON: ") + e.what());
  }
  if (!duplicate.empty()) throw Error(where, line_prefix + duplicate, duplicate_key, "duplicate key");
  return j;
}

std::string dump_short(const ojson& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Field access with errors that name the field path.
struct Fields {
  const std::string& where;
  std::string prefix;  // "line 3: " for workload lines

  [[noreturn]] void fail(const std::string& field, const ojson* value, const std::string& problem) const {
    throw Error(where, prefix + field, value ? dump_short(*value) : "", problem);
  }
  const ojson& object(const ojson& j, const std::string& field) const {
    if (!j.is_object()) fail(field, &j, "expected an object");
    return j;
  }
  void allow_keys(const ojson& j, const std::string& field, std::initializer_list<std::string_view> keys) const {
    for (const auto& [k, v] : j.items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end())
        fail(field.empty() ? k : field + "." + k, &v, "unknown key");
  }
  const ojson* get(const ojson& j, const std::string& key) const {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  }
  const ojson& require(const ojson& j, const std::string& field, const std::string& key) const {
    const ojson* v = get(j, key);
    if (!v) fail(join(field, key), nullptr, "missing");
    return *v;
  }
  std::string string(const ojson& v, const std::string& field) const {
    if (!v.is_string()) fail(field, &v, "expected a string");
    return v.get<std::string>();
  }
  int64_t positive_integer(const ojson& v, const std::string& field) const {
    if (!v.is_number_integer()) fail(field, &v, "expected a positive integer");
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(kMaxAxisValue) : v.get<int64_t>() > kMaxAxisValue)
      fail(field, &v, "larger than " + std::to_string(kMaxAxisValue));
    int64_t x = v.get<int64_t>();
    if (x < 1) fail(field, &v, "expected a positive integer");
    return x;
  }
  double number(const ojson& v, const std::string& field) const {
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(field, &v, "expected a finite number");
    return v.get<double>();
  }
  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }
};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool is_file_name_safe(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

std::vector<TensorSpec> parse_tensors(const ojson& j, const std::string& field, const Fields& f,
                                      const Definition& def) {
  std::vector<TensorSpec> out;
  f.object(j, field);
  for (const auto& [name, spec_json] : j.items()) {
    std::string path = field + "." + name;
    if (!is_identifier(name)) f.fail(path, nullptr, "a tensor name must be an identifier");
    f.object(spec_json, path);
    f.allow_keys(spec_json, path, {"shape", "dtype", "description"});
    TensorSpec spec;
    spec.name = name;
    const ojson& shape = f.require(spec_json, path, "shape");
    if (!shape.is_null()) {
      if (!shape.is_array()) f.fail(path + ".shape", &shape, "expected a list of axis names or null");
      std::vector<std::string> dims;
      for (size_t i = 0; i < shape.size(); ++i) {
        std::string dim_field = path + ".shape[" + std::to_string(i) + "]";
        std::string axis = f.string(shape[i], dim_field);
        if (!def.axis(axis)) f.fail(dim_field, &shape[i], "not an axis of the definition");
        dims.push_back(axis);
      }
      spec.shape = std::move(dims);
    }
    const ojson& dtype = f.require(spec_json, path, "dtype");
    std::string dtype_text = f.string(dtype, path + ".dtype");
    auto parsed = parse_dtype(dtype_text);
    if (!parsed) f.fail(path + ".dtype", &dtype, "unknown dtype");
    spec.dtype = *parsed;
    if (const ojson* d = f.get(spec_json, "description")) spec.description = f.string(*d, path + ".description");
    out.push_back(std::move(spec));
  }
  return out;
}

// Expression axes: every name must be an axis, with no cycle; those over constants only are checked now.
void check_axis_expressions(const Definition& def, const Fields& f) {
  std::map<std::string, std::set<std::string>> deps;
  for (const auto& [name, axis] : def.axes) {
    if (axis.kind != Axis::Kind::expression) continue;
    std::string field = "axes." + name + ".expression";
    Expression e = Expression::parse(axis.expression, f.where, field);
    for (const std::string& n : e.names())
      if (!def.axis(n)) f.fail(field, nullptr, "'" + n + "' in \"" + axis.expression + "\" is not an axis");
    deps[name] = e.names();
  }
  // Depth-first search for cycles among expression axes.
  std::map<std::string, int> state;  // 1 visiting, 2 done
  std::function<void(const std::string&)> visit = [&](const std::string& a) {
    if (state[a] == 2 || !deps.count(a)) return;
    if (state[a] == 1) f.fail("axes." + a + ".expression", nullptr, "axis expressions form a cycle");
    state[a] = 1;
    for (const std::string& d : deps[a]) visit(d);
    state[a] = 2;
  };
  for (const auto& [name, _] : deps) visit(name);
  // Evaluate the ones that depend on constants only.
  std::map<std::string, int64_t> known;
  for (const auto& [name, axis] : def.axes)
    if (axis.kind == Axis::Kind::constant) known[name] = axis.value;
  bool progress = true;
  while (progress) {
    progress = false;
    for (const auto& [name, names] : deps) {
      if (known.count(name)) continue;
      if (!std::all_of(names.begin(), names.end(), [&](const std::string& n) { return known.count(n) > 0; })) continue;
      std::string field = "axes." + name + ".expression";
      int64_t v = Expression::parse(def.axis(name)->expression, f.where, field).evaluate_integer(known, f.where, field);
      if (v < 1) f.fail(field, nullptr, def.axis(name)->expression + " = " + std::to_string(v) + " is not positive");
      known[name] = v;
      progress = true;
    }
  }
}

Definition parse_definition_json(const ojson& j, const std::string& where, std::optional<Source> source) {
  Fields f{where, ""};
  f.object(j, "");
  f.allow_keys(j, "",
               {"name", "description", "op_type", "tags", "axes", "constraints", "inputs", "outputs", "reference",
                "hf_id", "custom_inputs_entrypoint"});
  Definition def;
  def.source = source ? *source : (j.contains("op_type") ? Source::flashinfer_bench : Source::sol_execbench);
  def.name = f.string(f.require(j, "", "name"), "name");
  if (!is_file_name_safe(def.name)) f.fail("name", &j["name"], "a name may hold letters, digits, '_', '-', '.'");
  if (const ojson* d = f.get(j, "description")) def.description = f.string(*d, "description");
  if (const ojson* op = f.get(j, "op_type"))
    def.op_type = f.string(*op, "op_type");
  else if (def.source == Source::flashinfer_bench)
    f.fail("op_type", nullptr, "missing");
  if (const ojson* tags = f.get(j, "tags")) {
    if (!tags->is_array()) f.fail("tags", tags, "expected a list of strings");
    for (size_t i = 0; i < tags->size(); ++i)
      def.tags.push_back(f.string((*tags)[i], "tags[" + std::to_string(i) + "]"));
  }
  if (const ojson* h = f.get(j, "hf_id"); h && !h->is_null()) f.string(*h, "hf_id");
  if (const ojson* c = f.get(j, "custom_inputs_entrypoint"); c && !c->is_null())
    f.string(*c, "custom_inputs_entrypoint");

  const ojson& axes = f.object(f.require(j, "", "axes"), "axes");
  if (axes.empty()) f.fail("axes", &axes, "a definition needs at least one axis");
  for (const auto& [name, a] : axes.items()) {
    std::string field = "axes." + name;
    if (!is_identifier(name)) f.fail(field, nullptr, "an axis name must be an identifier");
    f.object(a, field);
    f.allow_keys(a, field, {"type", "value", "expression", "description"});
    Axis axis;
    const ojson& type = f.require(a, field, "type");
    std::string kind = f.string(type, field + ".type");
    const ojson* value = f.get(a, "value");
    const ojson* expression = f.get(a, "expression");
    if (kind == "const") {
      axis.kind = Axis::Kind::constant;
      if (!value) f.fail(field + ".value", nullptr, "a const axis needs a value");
      axis.value = f.positive_integer(*value, field + ".value");
      if (expression) f.fail(field + ".expression", expression, "a const axis has no expression");
    } else if (kind == "var") {
      axis.kind = Axis::Kind::variable;
      if (value) f.fail(field + ".value", value, "a var axis takes its value from each workload");
      if (expression) f.fail(field + ".expression", expression, "a var axis has no expression");
    } else if (kind == "expr") {
      axis.kind = Axis::Kind::expression;
      if (!expression) f.fail(field + ".expression", nullptr, "an expr axis needs an expression");
      axis.expression = f.string(*expression, field + ".expression");
      if (value) f.fail(field + ".value", value, "an expr axis has no value");
    } else {
      f.fail(field + ".type", &type, "unknown axis type (const, var, expr)");
    }
    if (const ojson* d = f.get(a, "description")) axis.description = f.string(*d, field + ".description");
    def.axes.emplace_back(name, std::move(axis));
  }
  check_axis_expressions(def, f);

  def.inputs = parse_tensors(f.require(j, "", "inputs"), "inputs", f, def);
  def.outputs = parse_tensors(f.require(j, "", "outputs"), "outputs", f, def);
  if (def.outputs.empty()) f.fail("outputs", nullptr, "a definition needs at least one output");
  for (const TensorSpec& out : def.outputs) {
    if (def.input(out.name)) f.fail("outputs." + out.name, nullptr, "also the name of an input");
    if (out.is_scalar()) f.fail("outputs." + out.name + ".shape", nullptr, "outputs must be tensors");
  }
  for (const TensorSpec& in : def.inputs)
    if (def.axis(in.name)) f.fail("inputs." + in.name, nullptr, "also the name of an axis");

  if (const ojson* c = f.get(j, "constraints")) {
    if (!c->is_array()) f.fail("constraints", c, "expected a list of expressions");
    for (size_t i = 0; i < c->size(); ++i) {
      std::string field = "constraints[" + std::to_string(i) + "]";
      std::string text = f.string((*c)[i], field);
      Expression e = Expression::parse(text, where, field);
      for (const std::string& n : e.names())
        if (!def.axis(n) && !def.input(n)) f.fail(field, &(*c)[i], "'" + n + "' is neither an axis nor an input");
      def.constraints.push_back(std::move(text));
    }
  }
  if (const ojson* r = f.get(j, "reference"))
    def.reference = f.string(*r, "reference");
  else if (def.source == Source::flashinfer_bench)
    f.fail("reference", nullptr, "missing");
  def.raw = nlohmann::json::parse(j.dump());
  return def;
}

InputSpec parse_input_spec(const ojson& j, const std::string& field, const TensorSpec& spec, const Fields& f) {
  f.object(j, field);
  f.allow_keys(j, field, {"type", "value", "path", "tensor_key", "lengths"});
  InputSpec in;
  const ojson& type = f.require(j, field, "type");
  std::string kind = f.string(type, field + ".type");
  auto forbid = [&](const char* key) {
    if (const ojson* v = f.get(j, key)) f.fail(field + "." + key, v, "not allowed for type " + kind);
  };
  if (kind == "random") {
    in.kind = InputSpec::Kind::random;
    if (spec.is_scalar()) f.fail(field + ".type", &type, "a scalar input needs {\"type\": \"scalar\", \"value\": ...}");
    forbid("value"), forbid("path"), forbid("tensor_key");
    // kindex's extension: the page-table generator's length distribution. kv_indptr alone carries it (it sets the
    // lengths of the whole table), so a workload cannot give its three page-table inputs different ones.
    if (const ojson* l = f.get(j, "lengths")) {
      if (spec.name != "kv_indptr" || is_floating(spec.dtype))
        f.fail(field + ".lengths", l,
               spec.name == "kv_indices" || spec.name == "kv_last_page_len"
                   ? "only kv_indptr carries the page-table length distribution (it sets the whole table's)"
                   : "only the page table's kv_indptr takes a length distribution");
      in.lengths = f.string(*l, field + ".lengths");
      if (!parse_length_distribution(in.lengths))
        f.fail(field + ".lengths", l,
               "unknown page-table length distribution (" + std::string(length_distribution_names()) + ")");
    }
  } else if (kind == "scalar") {
    in.kind = InputSpec::Kind::scalar;
    if (!spec.is_scalar()) f.fail(field + ".type", &type, "a tensor input cannot be a scalar");
    in.value = f.number(f.require(j, field, "value"), field + ".value");
    forbid("path"), forbid("tensor_key"), forbid("lengths");
  } else if (kind == "safetensors") {
    in.kind = InputSpec::Kind::safetensors;
    if (spec.is_scalar()) f.fail(field + ".type", &type, "a scalar input needs {\"type\": \"scalar\", \"value\": ...}");
    in.path = f.string(f.require(j, field, "path"), field + ".path");
    if (in.path.empty()) f.fail(field + ".path", &j["path"], "empty path");
    in.tensor_key = spec.name;
    if (const ojson* k = f.get(j, "tensor_key")) in.tensor_key = f.string(*k, field + ".tensor_key");
    forbid("value"), forbid("lengths");
  } else {
    f.fail(field + ".type", &type, "unknown input type (random, scalar, safetensors)");
  }
  return in;
}

}  // namespace

Definition parse_definition(std::string_view json_text, const std::string& where, std::optional<Source> source) {
  return parse_definition_json(parse_json(json_text, where, ""), where, source);
}

Definition load_definition(const fs::path& file, std::optional<Source> source) {
  Definition def = parse_definition(read_text_file(file), file.string(), source);
  def.file = file.string();
  return def;
}

std::map<std::string, int64_t> resolve_axes(const Definition& def, const std::map<std::string, int64_t>& variables,
                                            const std::string& where) {
  std::map<std::string, int64_t> out;
  for (const auto& [name, axis] : def.axes) {
    if (axis.kind == Axis::Kind::constant) out[name] = axis.value;
    if (axis.kind != Axis::Kind::variable) continue;
    auto it = variables.find(name);
    if (it == variables.end()) throw Error(where, "axes." + name, "", "variable axis has no value");
    if (it->second < 1) throw Error(where, "axes." + name, std::to_string(it->second), "must be positive");
    out[name] = it->second;
  }
  for (const auto& [name, _] : variables)
    if (!def.axis(name) || def.axis(name)->kind != Axis::Kind::variable)
      throw Error(where, "axes." + name, std::to_string(variables.at(name)), "not a variable axis of " + def.name);
  // Expression axes may depend on each other (the loader rejected cycles): evaluate until all are known.
  for (size_t round = 0; round <= def.axes.size(); ++round) {
    bool all = true;
    for (const auto& [name, axis] : def.axes) {
      if (axis.kind != Axis::Kind::expression || out.count(name)) continue;
      std::string field = "axes." + name;
      Expression e = Expression::parse(axis.expression, where, field);
      if (!std::all_of(e.names().begin(), e.names().end(), [&](const std::string& n) { return out.count(n) > 0; })) {
        all = false;
        continue;
      }
      int64_t v = e.evaluate_integer(out, where, field);
      if (v < 1) throw Error(where, field, axis.expression + " = " + std::to_string(v), "must be positive");
      out[name] = v;
    }
    if (all) return out;
  }
  throw Error(where, "axes", "", "axis expressions could not be resolved (cycle)");
}

std::vector<int64_t> concrete_shape(const TensorSpec& spec, const std::map<std::string, int64_t>& axes) {
  std::vector<int64_t> shape;
  if (!spec.shape) return shape;
  for (const std::string& a : *spec.shape) {
    auto it = axes.find(a);
    if (it == axes.end()) throw Error("", spec.name + ".shape", a, "axis has no value");
    shape.push_back(it->second);
  }
  return shape;
}

Workload parse_workload_line(std::string_view line, const Definition& def, const std::string& where, int line_no,
                             const std::string& base_dir) {
  std::string prefix = "line " + std::to_string(line_no) + ": ";
  Fields f{where, prefix};
  ojson j = parse_json(line, where, prefix);
  f.object(j, "");
  std::string wf;  // the field path of the workload object: "workload" in a trace line, "" when bare
  const ojson* w = &j;
  if (j.contains("workload")) {
    f.allow_keys(j, "", {"definition", "solution", "workload", "evaluation"});
    if (const ojson* d = f.get(j, "definition")) {
      std::string name = f.string(*d, "definition");
      if (name != def.name) f.fail("definition", d, "this file belongs to " + def.name);
    }
    wf = "workload";
    w = &j["workload"];
  }
  f.object(*w, wf);
  f.allow_keys(*w, wf, {"uuid", "axes", "inputs", "tolerance"});
  auto field = [&](const std::string& k) { return Fields::join(wf, k); };

  Workload out;
  out.definition = def.name;
  out.base_dir = base_dir;
  out.source = where + ":" + std::to_string(line_no);
  out.uuid = f.string(f.require(*w, wf, "uuid"), field("uuid"));
  if (out.uuid.empty()) f.fail(field("uuid"), nullptr, "empty uuid");

  const ojson& axes = f.object(f.require(*w, wf, "axes"), field("axes"));
  for (const auto& [name, v] : axes.items()) {
    std::string af = field("axes." + name);
    const Axis* a = def.axis(name);
    if (!a) f.fail(af, &v, "not an axis of " + def.name);
    if (a->kind != Axis::Kind::variable) f.fail(af, &v, "not a variable axis (its value is fixed by the definition)");
    out.axes[name] = f.positive_integer(v, af);
  }
  for (const auto& [name, a] : def.axes)
    if (a.kind == Axis::Kind::variable && !out.axes.count(name))
      f.fail(field("axes." + name), nullptr, "variable axis missing");

  const ojson& inputs = f.object(f.require(*w, wf, "inputs"), field("inputs"));
  for (const auto& [name, v] : inputs.items()) {
    const TensorSpec* spec = def.input(name);
    if (!spec) f.fail(field("inputs." + name), &v, "not an input of " + def.name);
    out.inputs[name] = parse_input_spec(v, field("inputs." + name), *spec, f);
  }
  for (const TensorSpec& spec : def.inputs) {
    if (out.inputs.count(spec.name)) continue;
    if (spec.is_scalar()) f.fail(field("inputs." + spec.name), nullptr, "scalar input has no value");
    out.inputs[spec.name] = InputSpec{};  // tensors not listed are drawn at random
  }

  if (const ojson* t = f.get(*w, "tolerance")) {
    f.object(*t, field("tolerance"));
    f.allow_keys(*t, field("tolerance"), {"max_atol", "max_rtol", "required_match_ratio"});
    Tolerance tol;
    auto non_negative = [&](const char* key, double& dst) {
      if (const ojson* v = f.get(*t, key)) {
        dst = f.number(*v, field(std::string("tolerance.") + key));
        if (dst < 0) f.fail(field(std::string("tolerance.") + key), v, "must not be negative");
      }
    };
    non_negative("max_atol", tol.max_atol);
    non_negative("max_rtol", tol.max_rtol);
    if (const ojson* r = f.get(*t, "required_match_ratio")) {
      double ratio = f.number(*r, field("tolerance.required_match_ratio"));
      if (ratio < 0 || ratio > 1) f.fail(field("tolerance.required_match_ratio"), r, "must be in [0, 1]");
      tol.required_match_ratio = ratio;
    }
    out.tolerance = tol;
  }

  // Axis expressions and the constraints over axes alone can be judged now.
  auto all_axes = resolve_axes(def, out.axes, where);
  Expression::Scope scope{&all_axes, nullptr};
  for (size_t i = 0; i < def.constraints.size(); ++i) {
    std::string cf = prefix + "constraints[" + std::to_string(i) + "]";
    Expression e = Expression::parse(def.constraints[i], where, cf);
    if (!std::all_of(e.names().begin(), e.names().end(), [&](const std::string& n) { return all_axes.count(n) > 0; }))
      continue;
    if (e.evaluate(scope, where, cf) == 0.0)
      throw Error(where, cf, e.explain(scope, where, cf), "constraint violated: " + e.text());
  }
  out.raw = nlohmann::json::parse(j.dump());
  return out;
}

namespace {

// Calls fn(line_no, line) for every non-blank line.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++line_no;
    std::string_view line = text.substr(pos, end - pos);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) fn(line_no, line);
    if (end == text.size()) break;
    pos = end + 1;
  }
}

std::vector<Workload> parse_workloads_collecting(std::string_view text, const Definition& def, const std::string& where,
                                                 const std::string& base_dir, std::vector<Error>* errors) {
  std::vector<Workload> out;
  std::set<std::string> uuids;
  for_each_line(text, [&](int line_no, std::string_view line) {
    try {
      Workload w = parse_workload_line(line, def, where, line_no, base_dir);
      if (!uuids.insert(w.uuid).second)
        throw Error(where, "line " + std::to_string(line_no) + ": uuid", w.uuid, "duplicate workload uuid");
      out.push_back(std::move(w));
    } catch (const Error& e) {
      if (!errors) throw;
      errors->push_back(e);
    }
  });
  return out;
}

}  // namespace

std::vector<Workload> parse_workloads(std::string_view jsonl_text, const Definition& def, const std::string& where,
                                      const std::string& base_dir) {
  return parse_workloads_collecting(jsonl_text, def, where, base_dir, nullptr);
}

std::vector<Workload> load_workloads(const fs::path& file, const Definition& def, std::optional<fs::path> base_dir) {
  std::string dir = (base_dir ? *base_dir : file.parent_path()).string();
  return parse_workloads(read_text_file(file), def, file.string(), dir);
}

namespace {

std::optional<fs::path> implied_workloads_file(const fs::path& definition_file, const Definition& def) {
  fs::path dir = definition_file.parent_path();
  if (definition_file.filename() == "definition.json") {
    if (fs::exists(dir / "workload.jsonl")) return dir / "workload.jsonl";
    return std::nullopt;
  }
  // FIB: <root>/definitions/<op_type>/<name>.json -> <root>/workloads/<op_type>/<name>.jsonl
  fs::path root = dir.parent_path().parent_path();
  for (const fs::path& candidate : {root / "workloads" / dir.filename() / (def.name + ".jsonl"),
                                    root / "workloads" / def.op_type / (def.name + ".jsonl")})
    if (!def.op_type.empty() && fs::is_regular_file(candidate)) return candidate;
  return std::nullopt;
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  if (ec) throw Error(dir.string(), "", "", "cannot list directory: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

void load_fib_root(const fs::path& root, std::vector<Problem>& out, std::vector<Error>* errors) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root / "definitions", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".json") files.push_back(it->path());
  if (ec) throw Error((root / "definitions").string(), "", "", "cannot list directory: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    try {
      Problem p{load_definition(file), {}};
      if (auto wl = implied_workloads_file(file, p.definition))
        p.workloads =
            parse_workloads_collecting(read_text_file(*wl), p.definition, wl->string(), root.string(), errors);
      out.push_back(std::move(p));
    } catch (const Error& e) {
      if (!errors) throw;
      errors->push_back(e);
    }
  }
}

void visit_dataset(const fs::path& dir, int depth, std::vector<Problem>& out, std::vector<Error>* errors) {
  if (fs::is_directory(dir / "definitions")) return load_fib_root(dir, out, errors);
  if (fs::is_regular_file(dir / "definition.json")) {
    try {
      Problem p{load_definition(dir / "definition.json"), {}};
      if (fs::is_regular_file(dir / "workload.jsonl"))
        p.workloads = parse_workloads_collecting(read_text_file(dir / "workload.jsonl"), p.definition,
                                                 (dir / "workload.jsonl").string(), dir.string(), errors);
      out.push_back(std::move(p));
    } catch (const Error& e) {
      if (!errors) throw;
      errors->push_back(e);
    }
    return;
  }
  if (depth >= kMaxDatasetDepth) return;
  for (const fs::path& sub : sorted_entries(dir))
    if (fs::is_directory(sub) && sub.filename().string()[0] != '.' && !fs::is_symlink(sub))
      visit_dataset(sub, depth + 1, out, errors);
}

}  // namespace

std::vector<Problem> load_dataset(const fs::path& dir, std::vector<Error>* errors) {
  if (!fs::is_directory(dir)) throw Error(dir.string(), "", "", "not a directory");
  std::vector<Problem> out;
  size_t errors_before = errors ? errors->size() : 0;
  visit_dataset(dir, 0, out, errors);
  if (out.empty() && (!errors || errors->size() == errors_before))
    throw Error(dir.string(), "", "",
                "no definitions found (expected definitions/<op_type>/<name>.json or <problem>/definition.json)");
  return out;
}

Problem load_problem(const fs::path& definition_file, std::optional<fs::path> workloads_file) {
  Problem p{load_definition(definition_file), {}};
  bool sol_layout = definition_file.filename() == "definition.json";
  if (workloads_file) {
    p.workloads = load_workloads(*workloads_file, p.definition);
  } else if (auto wl = implied_workloads_file(definition_file, p.definition)) {
    fs::path base = sol_layout ? wl->parent_path() : definition_file.parent_path().parent_path().parent_path();
    p.workloads = load_workloads(*wl, p.definition, base);
  }
  return p;
}

}  // namespace kindex::catalog
