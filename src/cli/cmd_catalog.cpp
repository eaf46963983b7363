// `kindex catalog list | show NAME | check PATH | export [NAME...] [--dataset DIR] --out DIR`: the bundled problems,
// one problem in detail, a check of a user's dataset (a FlashInfer-Bench or SOL-ExecBench directory, or one
// definition file with its workloads) that reports every problem found and exits non-zero if there is any, and
// bundled (or a dataset's) decode problems as a FlashInfer-Bench dataset with their page tables as safetensors
// (catalog/fib_export.hpp).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

#include "catalog/builtin.hpp"
#include "catalog/constraints.hpp"
#include "catalog/fib_export.hpp"
#include "catalog/inputs.hpp"
#include "catalog/loader.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace kindex::cli {

namespace {

namespace fs = std::filesystem;
using namespace kindex::catalog;

std::string axes_text(const std::map<std::string, int64_t>& axes) {
  std::string s;
  for (const auto& [k, v] : axes) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

std::string shape_text(const TensorSpec& t) {
  if (t.is_scalar()) return "scalar";
  std::string s = "[";
  for (size_t i = 0; i < t.shape->size(); ++i) s += (i ? ", " : "") + (*t.shape)[i];
  return s + "]";
}

int list_command() {
  std::cout << std::left << std::setw(50) << "definition" << std::setw(18) << "source" << std::right << std::setw(10)
            << "workloads" << std::setw(8) << "small"
            << "\n";
  for (const std::string& name : list_builtin()) {
    Problem p = builtin_problem(name);
    int small = 0;
    for (const Workload& w : p.workloads) small += is_small(p.definition, w);
    std::cout << std::left << std::setw(50) << name << std::setw(18) << source_name(p.definition.source) << std::right
              << std::setw(10) << p.workloads.size() << std::setw(8) << small << "\n";
  }
  std::cout << "(any gqa_paged_decode_h{H}_kv{K}_d{D}_ps{P} name is generated on request: kindex catalog show NAME)\n";
  return 0;
}

int show_command(const std::string& name, bool json, bool reference) {
  Problem p = fs::is_regular_file(name) ? load_problem(name) : builtin_problem(name);
  const Definition& d = p.definition;
  if (json) {
    std::cout << d.raw.dump(2) << "\n";
    return 0;
  }
  if (reference) {
    std::cout << d.reference << "\n";
    return 0;
  }
  std::cout << d.name << " (" << source_name(d.source) << (d.op_type.empty() ? "" : ", " + d.op_type) << ")\n";
  if (!d.description.empty()) std::cout << "  " << d.description << "\n";
  std::cout << "axes:\n";
  for (const auto& [n, a] : d.axes) {
    std::cout << "  " << std::left << std::setw(22) << n;
    if (a.kind == Axis::Kind::constant) std::cout << "const " << a.value;
    if (a.kind == Axis::Kind::variable) std::cout << "var";
    if (a.kind == Axis::Kind::expression) std::cout << "expr " << a.expression;
    std::cout << "\n";
  }
  for (auto [title, list] : {std::pair{"inputs", &d.inputs}, {"outputs", &d.outputs}}) {
    std::cout << title << ":\n";
    for (const TensorSpec& t : *list)
      std::cout << "  " << std::left << std::setw(22) << t.name << std::setw(10) << dtype_name(t.dtype) << shape_text(t)
                << "\n";
  }
  if (!d.constraints.empty()) std::cout << "constraints:\n";
  for (const std::string& c : d.constraints) std::cout << "  " << c << "\n";
  std::cout << "workloads: " << p.workloads.size() << "\n";
  for (const Workload& w : p.workloads) {
    std::cout << "  " << w.uuid << "  " << axes_text(w.axes);
    if (w.tolerance) std::cout << "  atol=" << w.tolerance->max_atol << " rtol=" << w.tolerance->max_rtol;
    std::cout << (is_small(d, w) ? "  small" : "") << "\n";
  }
  return 0;
}

int check_command(const std::string& path, const std::string& workloads_file) {
  std::vector<Problem> problems;
  std::vector<Error> errors;
  if (fs::is_directory(path)) {
    problems = load_dataset(path, &errors);
  } else {
    try {
      problems.push_back(workloads_file.empty() ? load_problem(path) : load_problem(path, workloads_file));
    } catch (const Error& e) {
      errors.push_back(e);
    }
  }
  // Beyond the files: the index tensors and scalars each workload implies (page tables generated or read from
  // safetensors) must satisfy the definition's constraints and semantics. Random float data is not drawn.
  size_t workloads = 0;
  for (const Problem& p : problems) {
    for (const Workload& w : p.workloads) {
      ++workloads;
      try {
        GenerateOptions options;
        options.skip_random_floats = true;
        Inputs in = generate_inputs(p.definition, w, default_seed(p.definition), options);
        check_inputs(p.definition, resolve_axes(p.definition, w), in, w.source + " (workload " + w.uuid + ")",
                     /*allow_missing=*/true);
      } catch (const Error& e) {
        errors.push_back(e);
      }
    }
  }
  for (const Problem& p : problems)
    std::cout << "ok-format  " << p.definition.name << " (" << source_name(p.definition.source) << ", "
              << p.workloads.size() << " workloads)\n";
  for (const Error& e : errors) std::cout << "error      " << e.what() << "\n";
  std::cout << problems.size() << " definitions, " << workloads << " workloads, " << errors.size() << " errors\n";
  return errors.empty() ? 0 : 1;
}

// The main job's decode problems (catalog::seed_problems without the SOL one).
std::vector<std::string> seed_decode_problems() {
  std::vector<std::string> names;
  for (const std::string& name : seed_problems())
    if (auto def = find_builtin(name); def && decode_family_params(*def)) names.push_back(name);
  return names;
}

int export_command(const std::vector<std::string>& names, const std::string& dataset, const std::string& out) {
  const std::vector<ExportedDefinition> exported =
      !dataset.empty()  ? export_flashinfer_bench_dataset(dataset, out, names)
      : !names.empty() ? export_flashinfer_bench(names, out)
                       : export_flashinfer_bench(seed_decode_problems(), out);
  size_t workloads = 0;
  for (const ExportedDefinition& d : exported) {
    std::cout << d.name << ": " << d.workloads << " workloads\n";
    workloads += d.workloads;
  }
  std::cout << "FlashInfer-Bench dataset in " << out << " (" << exported.size() << " definitions, " << workloads
            << " workloads)\n";
  return 0;
}

}  // namespace

void add_catalog_command(CLI::App& app, Registry& registry) {
  CLI::App* cmd = app.add_subcommand("catalog", "The problem catalog: bundled definitions and dataset checks");
  cmd->require_subcommand(1);

  CLI::App* list = cmd->add_subcommand("list", "List the bundled definitions with their workload counts");
  list->callback([&registry] { registry.selected = [] { return list_command(); }; });

  struct ShowArgs {
    std::string name;
    bool json = false, reference = false;
  };
  auto show_args = std::make_shared<ShowArgs>();
  CLI::App* show = cmd->add_subcommand("show", "Show a definition (bundled name, decode-family name or file)");
  show->add_option("name", show_args->name, "Definition name or definition file")->required();
  show->add_flag("--json", show_args->json, "Print the definition JSON");
  show->add_flag("--reference", show_args->reference, "Print the reference code");
  show->callback([&registry, show_args] {
    registry.selected = [show_args] { return show_command(show_args->name, show_args->json, show_args->reference); };
  });

  struct CheckArgs {
    std::string path, workloads;
  };
  auto check_args = std::make_shared<CheckArgs>();
  CLI::App* check =
      cmd->add_subcommand("check", "Load a dataset directory or a definition file and report what is wrong");
  check->add_option("path", check_args->path, "Dataset directory or definition JSON file")->required();
  check->add_option("--workloads", check_args->workloads, "Workload JSONL for a definition file");
  check->callback([&registry, check_args] {
    registry.selected = [check_args] { return check_command(check_args->path, check_args->workloads); };
  });

  struct ExportArgs {
    std::vector<std::string> names;
    std::string format = "flashinfer-bench", dataset, out;
  };
  auto export_args = std::make_shared<ExportArgs>();
  CLI::App* exp = cmd->add_subcommand("export",
                                      "Write bundled decode problems, or a dataset's, as a FlashInfer-Bench dataset "
                                      "(page tables as safetensors files)");
  exp->add_option("names", export_args->names,
                  "Decode definitions: bundled ones (default: the two seed problems), or with --dataset some of its "
                  "(default: all)");
  exp->add_option("--dataset", export_args->dataset,
                  "A dataset directory to export instead of bundled problems (e.g. definitions/model_suite)")
      ->check(CLI::ExistingDirectory);
  exp->add_option("--format", export_args->format, "Dataset format")->check(CLI::IsMember({"flashinfer-bench"}));
  exp->add_option("--out", export_args->out, "Dataset root to write (definitions/, workloads/, blob/)")->required();
  exp->callback([&registry, export_args] {
    registry.selected = [export_args] {
      return export_command(export_args->names, export_args->dataset, export_args->out);
    };
  });
}

}  // namespace kindex::cli
