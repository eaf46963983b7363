// Solutions and peers as implementations (solution.hpp): the two harnesses' loaders, the Python process, the rounds.
#include "runner/execute/solution.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "runner/measurement.hpp"
#include "runner/execute/libraries.hpp"
#include "runner/execute/worker.hpp"
#include "catalog/loader.hpp"
#include "core/error.hpp"
#include "core/hex.hpp"

namespace kindex::runner {

namespace embedded_python {
struct File {
  std::string_view path, content;
};
extern const File kFiles[];
extern const size_t kFileCount;
}  // namespace embedded_python

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSolutionPrefix = "solution:";

std::string embedded(std::string_view name) {
  for (size_t i = 0; i < embedded_python::kFileCount; ++i)
    if (embedded_python::kFiles[i].path == name) return std::string(embedded_python::kFiles[i].content);
  throw std::logic_error("no embedded file " + std::string(name));
}

// --- peers -------------------------------------------------------------------------------------------------------

struct Peer {
  std::string name, description, module;  // module: the Python package it needs
  std::string set_up;                      // what its one-time set-up is
};

const std::vector<Peer>& peers() {
  static const std::vector<Peer> list = {
      {"flashinfer",
       "FlashInfer's BatchDecodeWithPagedKVCacheWrapper (CUDA-core decode kernels, use_tensor_cores=False): plan() "
       "once per round outside the timed calls, run() timed",
       "flashinfer", "FlashInfer's JIT build of its kernels at the first plan(), kept on disk for the next runs"},
      {"flashinfer-tc",
       "FlashInfer's BatchDecodeWithPagedKVCacheWrapper with use_tensor_cores=True (its prefill kernels for decode): "
       "plan() once per round outside the timed calls, run() timed",
       "flashinfer", "FlashInfer's JIT build of its kernels at the first plan(), kept on disk for the next runs"},
      {"torch-compile",
       "the definition's reference code under torch.compile(dynamic=False), compiled once per shape outside the "
       "timed calls (SOL-ExecBench's baseline T_b)",
       "torch", "torch.compile of each shape, one graph per shape; Inductor keeps them on disk for the next runs"},
  };
  return list;
}

const Peer* find_peer(const std::string& name) {
  for (const auto& p : peers())
    if (p.name == name) return &p;
  return nullptr;
}

// The peer as a solution of `def`: its sources (src/runner/python) and a config naming the definition's arguments.
SolutionFile peer_solution(const Peer& peer, const catalog::Definition& def) {
  SolutionFile s;
  s.harness = "kindex";
  s.name = peer.name + "_" + def.name;
  s.definition = def.name;
  s.author = "kindex";
  s.description = peer.description;
  s.entry_file = "main.py";
  s.entry_function = "run";
  json names = json::array(), outputs = json::array();
  for (const auto& t : def.inputs) names.push_back(t.name);
  for (const auto& t : def.outputs) outputs.push_back(t.name);
  std::string config = "# Written by kindex for this definition: the solution's arguments, in order.\nINPUTS = " +
                       names.dump() + "\nOUTPUTS = " + outputs.dump() + "\n";
  if (peer.name == "torch-compile") {
    s.languages = {"pytorch"};
    s.destination_passing_style = false;
    s.sources = {{"main.py", embedded("peer_torch_compile.py")}, {"reference.py", def.reference}};
  } else {
    s.languages = {"python"};
    s.destination_passing_style = true;
    config += std::string("USE_TENSOR_CORES = ") + (peer.name == "flashinfer-tc" ? "True" : "False") + "\n";
    s.sources = {{"main.py", embedded("peer_flashinfer_decode.py")}};
  }
  s.sources.emplace_back("kindex_peer_config.py", config);
  return s;
}

// --- the Python process ------------------------------------------------------------------------------------------

std::string& scratch_root() {
  static std::string root;
  return root;
}

// One Python process per implementation spec, kept by the worker process for its later runs (importing torch
// takes seconds); replaced after it dies or reports a sticky CUDA error.
class PythonProcess {
 public:
  PythonProcess() {
    std::error_code ec;
    const std::string root = !scratch_root().empty() ? scratch_root() : fs::temp_directory_path(ec).string();
    std::string templ = root + "/kindex-solution-XXXXXX";
    if (!mkdtemp(templ.data()))
      throw RunFailure(RunStatus::runtime_error, "cannot create a scratch folder for Python under " + root);
    dir_ = templ;
    const std::string script = dir_ + "/solution_worker.py";
    std::ofstream(script) << embedded("solution_worker.py");
    const char* python = std::getenv("KINDEX_PYTHON");
    python_ = python && *python ? python : "python3";
    worker_ = std::make_unique<Worker>(std::vector<std::string>{python_, "-u", "-B", script}, dir_ + "/stderr.log");
  }
  ~PythonProcess() {
    worker_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }

  // Sends one request; a reply with ok = false throws RunFailure with its status. `dead` is set when the process
  // is gone or unusable (the caller drops it).
  json request(const json& req, bool* dead) {
    std::string line;
    auto reply = worker_->request(req.dump(-1, ' ', false, json::error_handler_t::replace), 1e7, &line);
    if (reply != Worker::Reply::line) {
      *dead = true;
      const std::string how = worker_->stop(true);
      std::string why = how == "exit code 127" ? "could not start " + python_ + " (set KINDEX_PYTHON to a Python 3)"
                                               : "the solution's Python process died (" + how + ")";
      throw RunFailure(RunStatus::runtime_error, why + stderr_tail());
    }
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      *dead = true;
      throw RunFailure(RunStatus::runtime_error, "the solution's Python process sent an unreadable reply");
    }
    if (!j.value("ok", false)) {
      if (j.value("sticky", false)) *dead = true;
      const std::string status = j.value("status", "runtime_error");
      throw RunFailure(status == "resource_exceeded" ? RunStatus::resource_exceeded : RunStatus::runtime_error,
                       j.value("message", "the solution failed"));
    }
    return j;
  }

 private:
  std::string stderr_tail() const {
    std::ifstream in(dir_ + "/stderr.log", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
    if (all.empty()) return "";
    return "; its last output: " + (all.size() > 600 ? "..." + all.substr(all.size() - 600) : all);
  }
  std::string dir_, python_;
  std::unique_ptr<Worker> worker_;
};

std::map<std::string, std::unique_ptr<PythonProcess>>& python_processes() {
  static std::map<std::string, std::unique_ptr<PythonProcess>> processes;
  // A worker whose input closes ends its Python processes first: each sees its input close and exits (torch's own
  // exit handlers run, Inductor's compile workers end), and is waited for, so its CPU time is counted. Registered in
  // each process that uses them: a forked worker starts with no exit hooks, whatever its parent registered.
  static pid_t hooked_in = -1;
  if (hooked_in != ::getpid()) {
    hooked_in = ::getpid();
    Worker::at_exit([] { processes.clear(); });
  }
  return processes;
}

json round_request_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  return {{"name", name}, {"dtype", std::string(dtype_name(dtype))}, {"shape", shape}};
}

void write_bytes(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), std::streamsize(bytes));
  if (!out) throw RunFailure(RunStatus::runtime_error, "cannot write " + path);
}

class SolutionImplementation final : public Implementation, public RoundRunner {
 public:
  SolutionImplementation(std::string spec, std::optional<SolutionFile> file, const Peer* peer)
      : spec_(std::move(spec)), file_(std::move(file)), peer_(peer) {
    info_.name = spec_;
    info_.on_device = device::built_with_cuda() && device::available();
    if (file_) {
      info_.language = file_->languages.front();
      info_.version = file_->name;
      info_.path = file_->path;
      info_.symbol = file_->entry_file + "::" + file_->entry_function;
      info_.interface = file_->harness == "flashinfer-bench" ? "flashinfer_bench_solution" : "sol_execbench_solution";
      info_.description = (file_->harness == "flashinfer-bench" ? "FlashInfer-Bench solution "
                                                                : "SOL-ExecBench solution ") +
                          file_->name + " by " + (file_->author.empty() ? "?" : file_->author) + " for " +
                          file_->definition + " (" + file_->languages.front() + ", run by kindex's Python worker)" +
                          (file_->description.empty() ? "" : ": " + file_->description);
    } else {
      info_.language = peer_->name == "torch-compile" ? "pytorch" : "python";
      info_.symbol = "main.py::run";
      info_.interface = "kindex_peer";
      info_.description = peer_->description;
      // Whether the peer's package imports here, and its version; a missing one is "not installed".
      bool dead = false;
      try {
        json reply = process(&dead).request({{"op", "probe"}, {"modules", {peer_->module}}}, &dead);
        if (reply["missing"].contains(peer_->module))
          info_.not_installed = "not installed: " + reply["missing"][peer_->module].get<std::string>();
        else
          info_.version = peer_->module + " " + reply["versions"].value(peer_->module, "?");
        info_.compile_cache_empty = reply.value("compile_cache_empty", false);
      } catch (const RunFailure& e) {
        info_.not_installed = std::string("not installed: ") + e.what();
      }
      if (dead) python_processes().erase(spec_);
      if (!info_.not_installed.empty()) info_.description += " (" + info_.not_installed + ")";
    }
  }

  const ImplementationInfo& info() const override { return info_; }
  std::string unsupported_reason(const catalog::Definition& def) const override {
    if (auto why = Implementation::unsupported_reason(def); !why.empty()) return why;
    if (!info_.not_installed.empty()) return spec_ + ": " + info_.not_installed;
    if (file_ && file_->definition != def.name)
      return file_->path + " solves definition " + file_->definition + ", not " + def.name;
    if (peer_ && peer_->module == "flashinfer" &&
        (problem_kind(def) != ProblemKind::paged_decode || !gpu_reference_computes(def)))
      return spec_ + " runs the plain paged decode definitions only (no decode variant)";
    if (peer_ && peer_->name == "torch-compile" && def.reference.empty())
      return def.name + " has no reference code to compile";
    return "";
  }
  size_t workspace_bytes(ProblemKind, const CallArgs&) const override { return 0; }
  void run(ProblemKind, const CallArgs&, void*, size_t, void*) override {
    throw std::logic_error("a solution runs whole rounds (round_runner)");
  }
  RoundRunner* round_runner() override { return this; }

  Outputs run_round(const catalog::Definition& def, const catalog::Workload& w, const catalog::Inputs& inputs,
                    uint64_t seed, const TensorMap* device_outputs) override {
    bool dead = false;
    try {
      return run_round_in(process(&dead), def, w, inputs, seed, device_outputs, &dead);
    } catch (...) {
      if (dead) python_processes().erase(spec_);
      throw;
    }
  }

  TimingSamples time_round(const TimingProtocol& p, bool fresh_addresses, bool prefer_cupti) override {
    bool dead = false;
    try {
      json protocol = protocol_json(p);
      protocol["prefer_cupti"] = prefer_cupti;
      json reply = process(&dead).request(
          {{"op", "time"}, {"protocol", protocol}, {"fresh_addresses", fresh_addresses}}, &dead);
      TimingSamples t;
      t.ns = reply.at("ns").get<std::vector<double>>();
      t.timer = reply.value("timer", "");
      t.note = reply.value("note", "");
      if (t.ns.size() != size_t(p.iterations))
        throw RunFailure(RunStatus::runtime_error, "the Python worker timed " + std::to_string(t.ns.size()) +
                                                       " calls, not " + std::to_string(p.iterations));
      return t;
    } catch (...) {
      if (dead) python_processes().erase(spec_);
      throw;
    }
  }

  Prepared prepare(const catalog::Definition& def, const std::vector<PrepareCall>& calls) override {
    bool dead = false;
    try {
      PythonProcess& py = process(&dead);
      const std::string key = load(py, def, &dead);
      json recipes = json::array();
      for (size_t i = 0; i < calls.size(); ++i) {
        const auto axes = catalog::resolve_axes(def, *calls[i].workload);
        json outs = json::array();
        for (const auto& spec : def.outputs)
          outs.push_back(round_request_tensor(spec.name, spec.dtype, catalog::concrete_shape(spec, axes)));
        const std::string prefix = "prepare" + std::to_string(i) + "_";
        recipes.push_back({{"inputs", input_recipe(py, def, calls[i].inputs, 0, prefix, true)}, {"outputs", outs}});
      }
      json reply = py.request({{"op", "prepare"}, {"key", key}, {"calls", recipes}}, &dead);
      const json cache = reply.value("compile_cache", json::object());
      return {reply.value("planned", 0), cache.value("hits", 0), cache.value("misses", 0)};
    } catch (...) {
      if (dead) python_processes().erase(spec_);
      throw;
    }
  }

 private:
  PythonProcess& process(bool* dead) {
    auto& slot = python_processes()[spec_];
    if (!slot) {
      try {
        slot = std::make_unique<PythonProcess>();
      } catch (const std::exception& e) {
        *dead = true;
        throw RunFailure(RunStatus::runtime_error, std::string("cannot start the solution's Python process: ") +
                                                       e.what());
      }
    }
    return *slot;
  }

  // Loads the solution of `def` into the Python process (once per process); returns its key there.
  std::string load(PythonProcess& py, const catalog::Definition& def, bool* dead) {
    const SolutionFile solution = file_ ? *file_ : peer_solution(*peer_, def);
    const std::string key = solution.name + "/" + def.name;
    if (loaded_.count(key) == 0) {
      json sources = json::array();
      for (const auto& [path, content] : solution.sources) sources.push_back({{"path", path}, {"content", content}});
      py.request({{"op", "load"},
                  {"key", key},
                  {"dir", py.dir()},
                  {"device", info_.on_device},
                  {"library", info_.on_device ? library_dir() + "/libkindex_gpu_reference.so" : ""},
                  {"solution",
                   {{"name", solution.name},
                    {"entry_file", solution.entry_file},
                    {"entry_function", solution.entry_function},
                    {"destination_passing_style", solution.destination_passing_style},
                    {"sources", sources}}}},
                 dead);
      loaded_.insert(key);
    }
    return key;
  }

  // The inputs in the definition's order: scalars by value, host tensors as files (named `prefix` + input), random
  // ones as the generator's description (drawn there on the device, the same bits as here), or, `unfilled`, as
  // their shape alone.
  static json input_recipe(PythonProcess& py, const catalog::Definition& def, const catalog::Inputs& inputs,
                           uint64_t seed, const std::string& prefix, bool unfilled) {
    json in = json::array();
    for (const auto& spec : def.inputs) {
      if (auto it = inputs.scalars.find(spec.name); it != inputs.scalars.end()) {
        in.push_back({{"name", spec.name}, {"scalar", it->second}});
      } else if (auto t = inputs.tensors.find(spec.name); t != inputs.tensors.end()) {
        json j = round_request_tensor(spec.name, t->second.dtype(), t->second.shape());
        j["file"] = py.dir() + "/" + prefix + "in_" + spec.name + ".bin";
        write_bytes(j["file"], t->second.data(), t->second.nbytes());
        in.push_back(j);
      } else if (auto r = inputs.random.find(spec.name); r != inputs.random.end()) {
        json j = round_request_tensor(spec.name, r->second.dtype, r->second.shape);
        if (unfilled) {
          j["unfilled"] = true;
        } else {
          const kindex_random_fill abi = random_fill_abi(r->second, seed);
          j["random"] = {{"kind", int(abi.kind)},  {"numel", abi.numel}, {"seed", abi.seed},
                         {"stream", abi.stream},   {"scale", abi.scale}, {"row", abi.row},
                         {"num_pages", abi.num_pages}, {"page_elems", abi.page_elems}, {"pages_file", ""}};
          if (!r->second.pages_used.empty()) {
            j["random"]["pages_file"] = py.dir() + "/" + prefix + "pages_" + spec.name + ".bin";
            write_bytes(j["random"]["pages_file"], r->second.pages_used.data(), r->second.pages_used.size());
          }
        }
        in.push_back(j);
      } else {
        throw RunFailure(RunStatus::runtime_error, "input " + spec.name + " was not generated");
      }
    }
    return in;
  }

  Outputs run_round_in(PythonProcess& py, const catalog::Definition& def, const catalog::Workload& w,
                       const catalog::Inputs& inputs, uint64_t seed, const TensorMap* device_outputs, bool* dead) {
    const std::string key = load(py, def, dead);
    json in = input_recipe(py, def, inputs, seed, "", false);
    const auto axes = catalog::resolve_axes(def, w);
    Outputs out;
    json outs = json::array();
    for (const auto& spec : def.outputs) {
      const auto shape = catalog::concrete_shape(spec, axes);
      json j = round_request_tensor(spec.name, spec.dtype, shape);
      if (device_outputs) {
        // The runner's buffer, by its CUDA IPC handle: the worker maps it once per run and copies the output there.
        const TensorView& dst = device_outputs->at(spec.name);
        if (dst.dtype != spec.dtype || dst.shape != shape)
          throw std::logic_error("run_round: device output " + spec.name + " is not shaped as the definition says");
        j["ipc"] = dst.nbytes() ? hex_lower(device::ipc_handle(dst.data)) : "";
      } else {
        out.tensors.emplace(spec.name, Tensor(spec.dtype, shape));
        j["file"] = py.dir() + "/out_" + spec.name + ".bin";
        std::error_code ec;
        fs::remove(j["file"].get<std::string>(), ec);
      }
      outs.push_back(j);
    }
    json reply = py.request({{"op", "round"}, {"key", key}, {"inputs", in}, {"outputs", outs}}, dead);
    if (reply.contains("plan_s") && reply["plan_s"].is_number()) out.plan_s = reply["plan_s"].get<double>();
    for (const auto& j : device_outputs ? json::array() : outs) {
      Tensor& t = out.tensors.at(j["name"]);
      // Read straight into the tensor (L2/003's outputs are ~100 MB a round: a byte-wise stream read and a second
      // copy cost ~0.5 s a round on the H200).
      const std::string path = j["file"];
      std::error_code ec;
      const auto size = fs::file_size(path, ec);
      std::ifstream file(path, std::ios::binary);
      if (ec || !file || size != t.nbytes())
        throw RunFailure(RunStatus::runtime_error, "output " + j["name"].get<std::string>() + ": the Python worker "
                                                   "wrote " + (ec ? std::string("no file") : std::to_string(size) +
                                                   " bytes") + ", expected " + std::to_string(t.nbytes()) + " bytes");
      if (size && !file.read(static_cast<char*>(t.data()), std::streamsize(size)))
        throw RunFailure(RunStatus::runtime_error, "output " + j["name"].get<std::string>() + ": cannot read " + path);
    }
    return out;
  }

  std::string spec_;
  std::optional<SolutionFile> file_;
  const Peer* peer_ = nullptr;
  ImplementationInfo info_;
  std::set<std::string> loaded_;
};

}  // namespace

ScratchFolder::ScratchFolder() {
  std::error_code ec;
  std::string templ = fs::temp_directory_path(ec).string() + "/kindex-bench-XXXXXX";
  if (mkdtemp(templ.data())) path_ = scratch_root() = templ;
}

ScratchFolder::~ScratchFolder() {
  // The Python processes started in this process (a bench run in process, isolate = false) end with the bench,
  // as a worker's do with the worker: their files are about to go.
  python_processes().clear();
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  if (scratch_root() == path_) scratch_root().clear();
}

const std::vector<std::string>& peer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : peers()) n.push_back(p.name);
    return n;
  }();
  return names;
}

std::string peer_names_text() {
  std::string text;
  for (const auto& p : peer_names()) text += (text.empty() ? "" : ", ") + p;
  return text;
}

bool is_peer(const std::string& spec) { return find_peer(spec) != nullptr; }
bool is_solution_spec(const std::string& spec) { return spec.rfind(kSolutionPrefix, 0) == 0 || is_peer(spec); }

bool peer_is_baseline_for(const std::string& peer, const catalog::Definition& def) {
  if (peer == "torch-compile") return def.source == catalog::Source::sol_execbench && !def.reference.empty();
  if (peer == "flashinfer" || peer == "flashinfer-tc")
    return problem_kind(def) == ProblemKind::paged_decode && gpu_reference_computes(def);
  return false;
}

std::string peer_set_up(const std::string& spec) {
  const Peer* p = find_peer(spec);
  return p ? p->set_up : "";
}

void check_solution_spec(const std::string& spec) {
  if (is_peer(spec)) return;
  if (spec.rfind(kSolutionPrefix, 0) != 0) throw Error("kindex bench", "--impl", spec, "not a solution or peer");
  const std::string path = spec.substr(std::string(kSolutionPrefix).size());
  if (path.empty())
    throw Error("kindex bench", "--impl", spec, "solution: needs a solution file, e.g. solution:./my_solution.json");
  read_solution_file(path);
}

std::unique_ptr<Implementation> make_solution_implementation(const std::string& spec) {
  if (const Peer* p = find_peer(spec)) return std::make_unique<SolutionImplementation>(spec, std::nullopt, p);
  check_solution_spec(spec);
  return std::make_unique<SolutionImplementation>(
      spec, read_solution_file(spec.substr(std::string(kSolutionPrefix).size())), nullptr);
}

}  // namespace kindex::runner
