#include "problem_manifest/problem_manifest.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "catalog/constraints.hpp"
#include "catalog/fib_export.hpp"
#include "catalog/page_table.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "evidence/digest.hpp"

namespace kindex::problem_manifest {

using nlohmann::json;
using nlohmann::ordered_json;

std::string slug(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c)) {
      out += static_cast<char>(std::tolower(c));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unnamed" : out;
}

std::string short_dtype(const std::string& d) {
  static const std::map<std::string, std::string> names = {
      {"bfloat16", "bf16"}, {"float16", "fp16"}, {"half", "fp16"}, {"float32", "fp32"}, {"float", "fp32"},
      {"float64", "fp64"}, {"double", "fp64"}, {"int32", "int32"}, {"int64", "int64"}, {"int8", "int8"},
      {"uint8", "uint8"}, {"bool", "bool"}, {"float8_e4m3fn", "fp8_e4m3"}, {"float8_e5m2", "fp8_e5m2"}};
  auto it = names.find(d);
  return it == names.end() ? d : it->second;
}

namespace {

const json& member_or_empty(const json& j, const char* key) {
  static const json empty = json::object();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? empty : *it;
}

}  // namespace

ordered_json definition_document(const catalog::Definition& def) {
  ordered_json doc = {{"name", def.name}};
  if (!def.description.empty()) doc["description"] = def.description;
  if (def.source == catalog::Source::flashinfer_bench) doc["op_type"] = def.op_type;
  ordered_json axes = ordered_json::object();
  for (const auto& [name, axis] : def.axes) {
    switch (axis.kind) {
      case catalog::Axis::Kind::constant: axes[name] = {{"type", "const"}, {"value", axis.value}}; break;
      case catalog::Axis::Kind::variable: axes[name] = {{"type", "var"}}; break;
      case catalog::Axis::Kind::expression: axes[name] = {{"type", "expr"}, {"expression", axis.expression}}; break;
    }
  }
  doc["axes"] = axes;
  auto tensors = [](const std::vector<catalog::TensorSpec>& specs) {
    ordered_json out = ordered_json::object();
    for (const auto& t : specs) {
      ordered_json o = {{"dtype", std::string(dtype_name(t.dtype))}};
      o["shape"] = t.shape ? ordered_json(*t.shape) : ordered_json(nullptr);
      out[t.name] = o;
    }
    return out;
  };
  doc["inputs"] = tensors(def.inputs);
  doc["outputs"] = tensors(def.outputs);
  return doc;
}

json workload_document(const catalog::Workload& w) {
  json inputs = json::object();
  for (const auto& [name, spec] : w.inputs) {
    switch (spec.kind) {
      case catalog::InputSpec::Kind::random:
        inputs[name] = {{"type", "random"}};
        if (!spec.lengths.empty()) inputs[name]["lengths"] = spec.lengths;
        break;
      case catalog::InputSpec::Kind::scalar:
        inputs[name] = {{"type", "scalar"}, {"value", spec.value}};
        break;
      case catalog::InputSpec::Kind::safetensors:
        inputs[name] = {{"type", "safetensors"}, {"path", spec.path}, {"tensor_key", spec.tensor_key}};
        break;
    }
  }
  json doc = {{"uuid", w.uuid}, {"axes", w.axes}, {"inputs", inputs}};
  if (w.tolerance) {
    doc["tolerance"] = {{"max_atol", w.tolerance->max_atol}, {"max_rtol", w.tolerance->max_rtol}};
    if (w.tolerance->required_match_ratio) doc["tolerance"]["required_match_ratio"] = *w.tolerance->required_match_ratio;
  }
  return doc;
}

namespace {

json operation_document_unchecked(const ordered_json& def, const std::string& where) {
  if (!def.is_object()) throw Error(where, "definition", "", "not a JSON object");
  std::string name = def.value("name", "");
  if (name.empty()) throw Error(where, "name", "", "a definition needs a name");
  json axes = json::object();
  const ordered_json no_axes = ordered_json::object();
  for (const auto& [axis, a] : def.contains("axes") ? def["axes"].items() : no_axes.items()) {
    std::string type = a.value("type", "");
    if (type == "const") {
      axes[axis] = {{"role", "constant"}, {"type", "integer"}, {"value", a.at("value").get<int64_t>()}};
    } else if (type == "var") {
      axes[axis] = {{"role", "variable"}, {"type", "integer"}};
    } else if (type == "expr") {
      axes[axis] = {{"role", "derived"}, {"type", "integer"}, {"expression", a.at("expression").get<std::string>()}};
    } else {
      throw Error(where, "axes." + axis + ".type", type, "expected const, var or expr");
    }
  }
  auto tensors = [&](const char* key) {
    json out = json::array();
    if (!def.contains(key)) return out;
    for (const auto& [tname, t] : def[key].items()) {
      std::string dtype = short_dtype(t.value("dtype", ""));
      if (t.contains("shape") && t["shape"].is_array()) {
        out.push_back({{"name", tname}, {"tensor", {{"dtype", dtype}, {"shape", json::parse(t["shape"].dump())}}}});
      } else {
        out.push_back({{"name", tname}, {"scalar", {{"dtype", dtype}}}});
      }
    }
    return out;
  };
  std::string family = def.contains("op_type") ? slug(def.value("op_type", "")) : slug(name);
  json metadata = {{"name", slug(name)}, {"title", name}};
  if (def.contains("description") && def["description"].is_string())
    metadata["description"] = def["description"].get<std::string>();
  return {{"apiVersion", evidence::kApiVersion},
          {"kind", "OperationSpec"},
          {"metadata", metadata},
          {"spec",
           {{"axes", axes},
            {"family", family},
            {"inputs", tensors("inputs")},
            {"outputs", tensors("outputs")},
            {"reference", {{"language", "python"}}},
            {"semantics", {{"mutation", "none"}, {"determinism", "unspecified"}}}}}};
}

evidence::Manifest workload_case_unchecked(const json& op, const json& w, const std::string& definition_name,
                                           const std::string& where);

}  // namespace

// A member of the wrong type (a shape that is not a list, an axis that is not an object, ...) is refused as
// kindex::Error naming the document, not as a JSON library exception.
json operation_document(const ordered_json& def, const std::string& where) {
  try {
    return operation_document_unchecked(def, where);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where, "definition", "", std::string("not the shape of a FlashInfer-Bench / SOL-ExecBench definition: ") + e.what());
  }
}

evidence::Manifest workload_case(const json& op, const json& w, const std::string& definition_name,
                                 const std::string& where) {
  if (!w.is_object()) throw Error(where, "workload", w.dump().substr(0, 60), "expected an object");
  if (w.contains("inputs") && !w["inputs"].is_object() && !w["inputs"].is_null())
    throw Error(where, "workload.inputs", w["inputs"].dump().substr(0, 60), "expected an object");
  try {
    return workload_case_unchecked(op, w, definition_name, where);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where, "workload", "", std::string("not the shape of a workload of ") + definition_name + ": " + e.what());
  }
}

evidence::Manifest operation_spec(const catalog::Definition& def) {
  return evidence::make_manifest(operation_document(definition_document(def), def.name), "OperationSpec " + def.name);
}

namespace {

bool is_page_table_input(const std::string& name) {
  return name == "kv_indptr" || name == "kv_indices" || name == "kv_last_page_len";
}

// The data generator a page table made by kindex's generator is recorded with: "random" for the default
// (exponential) lengths, as every workload before the option, so their digests stay; "random_<lengths>" for another
// distribution, so a workload that differs only in it is another WorkloadCase.
std::string page_table_generator(const std::string& lengths, const std::string& where) {
  if (lengths.empty()) return "random";
  auto d = catalog::parse_length_distribution(lengths);
  if (!d)
    throw Error(where, "workload.inputs.kv_indptr.lengths", lengths,
                "unknown page-table length distribution (" + std::string(catalog::length_distribution_names()) + ")");
  return *d == catalog::LengthDistribution::exponential ? "random" : "random_" + lengths;
}

evidence::Manifest workload_case_unchecked(const json& op, const json& w, const std::string& definition_name,
                                           const std::string& where) {
  // Axis values: variables from the workload, constants from the operation, derived ones evaluated (in
  // dependency order: a derived axis may use another).
  std::map<std::string, int64_t> axes;
  json var_axes = json::object();
  for (const auto& [k, v] : member_or_empty(w, "axes").items()) {
    if (!v.is_number_integer()) throw Error(where, "workload.axes." + k, v.dump(), "expected an integer");
    axes[k] = v.get<int64_t>();
    var_axes[k] = v;
  }
  const json& op_axes = op.at("spec").at("axes");
  std::map<std::string, catalog::Expression> derived;
  for (const auto& [k, a] : op_axes.items()) {
    const std::string role = a.value("role", "");
    if (role == "constant") axes[k] = a.at("value").get<int64_t>();
    if (role == "derived")
      derived.emplace(k, catalog::Expression::parse(a.at("expression").get<std::string>(), where, "axes." + k));
  }
  while (!derived.empty()) {
    bool progressed = false;
    for (auto it = derived.begin(); it != derived.end();) {
      const auto& names = it->second.names();
      if (std::all_of(names.begin(), names.end(), [&](const std::string& n) { return axes.count(n) > 0; })) {
        axes[it->first] = it->second.evaluate_integer(axes, where, "axes." + it->first);
        it = derived.erase(it);
        progressed = true;
      } else {
        ++it;
      }
    }
    // A name no axis gives: evaluating names it (unknown axis) in the catalog's words.
    if (!progressed) {
      derived.begin()->second.evaluate_integer(axes, where, "axes." + derived.begin()->first);
      break;
    }
  }
  for (const auto& [k, a] : op_axes.items()) {
    if (!axes.count(k)) throw Error(where, "workload.axes." + k, "", "variable axis missing from the trace");
  }
  json tensors = json::object(), scalars = json::object();
  const json& inputs = member_or_empty(w, "inputs");
  // The length distribution of the generated page table: kv_indptr carries it for all three index inputs.
  std::string random_table_lengths;
  if (const json& indptr = member_or_empty(inputs, "kv_indptr"); indptr.contains("lengths")) {
    if (!indptr["lengths"].is_string())
      throw Error(where, "workload.inputs.kv_indptr.lengths", indptr["lengths"].dump(), "expected a string");
    random_table_lengths = indptr["lengths"].get<std::string>();
  }
  const std::string workload_uuid = w.value("uuid", json()).is_string() ? w["uuid"].get<std::string>() : "";
  for (const auto& in : op.at("spec").at("inputs")) {
    std::string name = in.at("name");
    json spec_in = inputs.value(name, json::object());
    if (in.contains("scalar")) {
      if (spec_in.contains("value")) scalars[name] = {{"dtype", in["scalar"]["dtype"]}, {"value", spec_in["value"]}};
      continue;
    }
    json shape = json::array();
    for (const auto& d : in.at("tensor").at("shape")) {
      if (d.is_number_integer()) {
        shape.push_back(d);
      } else {
        std::string axis = d.get<std::string>();
        if (!axes.count(axis)) throw Error(where, "shape of " + name, axis, "unknown axis");
        shape.push_back(axes[axis]);
      }
    }
    json tensor = {{"dtype", in["tensor"]["dtype"]}, {"shape", shape}};
    // A page table `kindex catalog export` wrote for this workload holds what kindex's generator gives its "random"
    // index inputs: the same data, so the same generator (a harness trace of it joins kindex's own workload).
    const bool safetensors = spec_in.is_object() && spec_in.value("type", json()) == "safetensors" &&
                             spec_in.value("path", json()).is_string();
    const std::optional<std::string> exported_lengths =
        safetensors ? catalog::exported_page_table_lengths(definition_name, workload_uuid, name,
                                                           spec_in["path"].get<std::string>())
                    : std::nullopt;
    if (exported_lengths)
      tensor["data"] = {{"generator", page_table_generator(*exported_lengths, where)}};
    else if (spec_in.is_object() && spec_in.value("type", json()) == "random" && is_page_table_input(name))
      tensor["data"] = {{"generator", page_table_generator(random_table_lengths, where)}};
    else if (spec_in.contains("type"))
      tensor["data"] = {{"generator", spec_in["type"]}};
    tensors[name] = tensor;
  }
  // KernelIndex records the definition comparator of FIB traces as sol_execbench_eval; kept for cohort parity.
  json correctness = {{"comparator", "sol_execbench_eval"}};
  if (const json& tol = member_or_empty(w, "tolerance"); !tol.empty()) {
    if (tol.contains("max_atol")) correctness["maxAbsoluteError"] = tol["max_atol"];
    if (tol.contains("max_rtol")) correctness["maxRelativeError"] = tol["max_rtol"];
  }
  std::string op_digest = evidence::make_manifest(op, where).digest;
  std::string axis_text;
  for (const auto& [k, v] : var_axes.items()) axis_text += (axis_text.empty() ? "" : ", ") + k + "=" + v.dump();
  json spec = {{"axes", var_axes}, {"tensors", tensors}, {"correctness", correctness}, {"operationSpecDigest", op_digest}};
  if (!scalars.empty()) spec["scalars"] = scalars;
  const json uuid = w.value("uuid", json());
  std::string uuid_hex = evidence::sha256_hex(uuid.is_string() ? uuid.get<std::string>() : where).substr(0, 8);
  return evidence::make_manifest(
      {{"apiVersion", evidence::kApiVersion},
       {"kind", "WorkloadCase"},
       {"metadata", {{"name", slug(definition_name) + "-" + uuid_hex}, {"title", definition_name + " · " + axis_text}}},
       {"spec", spec}},
      where);
}

}  // namespace

evidence::Manifest workload_case(const catalog::Definition& def, const catalog::Workload& w,
                                 const evidence::Manifest& operation) {
  return workload_case(operation.document, workload_document(w), def.name, "WorkloadCase " + def.name + "/" + w.uuid);
}

}  // namespace kindex::problem_manifest
