// The two harnesses' solution files (solution_file.hpp): one loader per schema.
#include "runner/execute/solution_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace kindex::runner {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json& field(const json& doc, const std::string& origin, const std::string& name, json::value_t type) {
  const json* at = &doc;
  std::string path;
  std::istringstream parts(name);
  for (std::string part; std::getline(parts, part, '.');) {
    path += (path.empty() ? "" : ".") + part;
    if (!at->is_object() || !at->contains(part)) throw Error(origin, path, "missing", "a solution needs it");
    at = &(*at)[part];
  }
  const bool ok = at->type() == type || (type == json::value_t::number_integer && at->is_number_integer());
  if (!ok) throw Error(origin, name, at->dump().substr(0, 80), std::string("must be a ") + json(type).type_name());
  return *at;
}

std::string text(const json& doc, const std::string& origin, const std::string& name) {
  auto s = field(doc, origin, name, json::value_t::string).get<std::string>();
  if (s.empty()) throw Error(origin, name, "\"\"", "must not be empty");
  return s;
}

// What both schemas share: name, definition, author, spec.entry_point, spec.destination_passing_style,
// spec.dependencies, sources (relative paths without "..", unique, the entry file among them).
SolutionFile parse_common(const json& doc, const std::string& origin, const std::string& harness) {
  if (!doc.is_object()) throw Error(origin, "", "", "a solution file holds one JSON object");
  SolutionFile s;
  s.harness = harness;
  s.name = text(doc, origin, "name");
  s.definition = text(doc, origin, "definition");
  s.author = doc.contains("author") && doc["author"].is_string() ? doc["author"].get<std::string>() : "";
  s.description =
      doc.contains("description") && doc["description"].is_string() ? doc["description"].get<std::string>() : "";
  const std::string entry = text(doc, origin, "spec.entry_point");
  const auto sep = entry.find("::");
  if (sep == std::string::npos || entry.find("::", sep + 2) != std::string::npos || sep == 0 ||
      sep + 2 == entry.size())
    throw Error(origin, "spec.entry_point", entry, "must be \"<file_path>::<function_name>\"");
  s.entry_file = entry.substr(0, sep);
  s.entry_function = entry.substr(sep + 2);
  const json& spec = doc["spec"];
  if (spec.contains("destination_passing_style")) {
    if (!spec["destination_passing_style"].is_boolean())
      throw Error(origin, "spec.destination_passing_style", spec["destination_passing_style"].dump(),
                  "must be true or false");
    s.destination_passing_style = spec["destination_passing_style"].get<bool>();
  }
  if (spec.contains("dependencies") && spec["dependencies"].is_array())
    for (const auto& d : spec["dependencies"])
      if (d.is_string()) s.dependencies.push_back(d.get<std::string>());
  const json& sources = field(doc, origin, "sources", json::value_t::array);
  if (sources.empty()) throw Error(origin, "sources", "[]", "a solution needs at least one source file");
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string where = "sources[" + std::to_string(i) + "]";
    if (!sources[i].is_object()) throw Error(origin, where, sources[i].dump().substr(0, 80), "must be an object");
    const std::string path = text(sources[i], origin + ": " + where, "path");
    const std::string content = text(sources[i], origin + ": " + where, "content");
    const fs::path p(path);
    if (p.is_absolute() || std::find(p.begin(), p.end(), fs::path("..")) != p.end())
      throw Error(origin, where + ".path", path, "must be relative, without \"..\"");
    for (const auto& [seen, unused] : s.sources)
      if (seen == path) throw Error(origin, where + ".path", path, "appears twice");
    s.sources.emplace_back(path, content);
  }
  if (std::none_of(s.sources.begin(), s.sources.end(), [&](const auto& f) { return f.first == s.entry_file; }))
    throw Error(origin, "spec.entry_point", entry, "its file is not among the sources");
  if (fs::path(s.entry_file).extension() != ".py")
    throw Error(origin, "spec.entry_point", entry,
                "kindex runs solutions whose entry point is Python source (a .py file)");
  return s;
}

}  // namespace

SolutionFile parse_flashinfer_bench_solution(const json& doc, const std::string& origin) {
  SolutionFile s = parse_common(doc, origin, "flashinfer-bench");
  const std::string language = text(doc, origin, "spec.language");
  // FlashInfer-Bench 0.1.2 builds python and triton solutions by importing them; cpp, cuda and tilelang need its
  // TVM-FFI / torch extension builders, which kindex does not have.
  if (language != "python" && language != "triton")
    throw Error(origin, "spec.language", language,
                language == "cuda" || language == "cpp" || language == "tilelang"
                    ? "kindex runs FlashInfer-Bench solutions in python or triton (compiled languages need the "
                      "harness's own builder)"
                    : "not a FlashInfer-Bench language (python, triton, cpp, cuda, tilelang)");
  s.languages = {language};
  return s;
}

SolutionFile parse_sol_execbench_solution(const json& doc, const std::string& origin) {
  SolutionFile s = parse_common(doc, origin, "sol-execbench");
  const json& languages = field(doc, origin, "spec.languages", json::value_t::array);
  if (languages.empty()) throw Error(origin, "spec.languages", "[]", "names at least one language");
  static const std::vector<std::string> python = {"pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend"};
  static const std::vector<std::string> compiled = {"cutlass", "cudnn", "cublas", "cuda_cpp"};
  for (const auto& l : languages) {
    const std::string name = l.is_string() ? l.get<std::string>() : l.dump();
    if (std::find(python.begin(), python.end(), name) != python.end()) {
      s.languages.push_back(name);
      continue;
    }
    throw Error(origin, "spec.languages", name,
                std::find(compiled.begin(), compiled.end(), name) != compiled.end()
                    ? "kindex runs SOL-ExecBench solutions in Python languages (pytorch, triton, cute_dsl, cutile, "
                      "cudnn_frontend); C++ ones need the harness's own build"
                    : "not a SOL-ExecBench language");
  }
  return s;
}

SolutionFile read_solution_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error("kindex bench", "--impl", "solution:" + path, "no such file");
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  json doc = json::parse(bytes, nullptr, false);
  if (doc.is_discarded()) throw Error(path, "", "", "not JSON (a solution file is one JSON object)");
  if (!doc.is_object() || !doc.contains("spec") || !doc["spec"].is_object())
    throw Error(path, "spec", "missing", "a FlashInfer-Bench or SOL-ExecBench solution has a spec object");
  const json& spec = doc["spec"];
  SolutionFile s;
  if (spec.contains("language"))
    s = parse_flashinfer_bench_solution(doc, path);
  else if (spec.contains("languages"))
    s = parse_sol_execbench_solution(doc, path);
  else
    throw Error(path, "spec.language", "missing",
                "spec.language (FlashInfer-Bench) or spec.languages (SOL-ExecBench) says whose solution this is");
  s.path = fs::absolute(path, ec).string();
  return s;
}

}  // namespace kindex::runner
