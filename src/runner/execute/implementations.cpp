// The implementations behind src/runner/execute/implementation.hpp.
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "runner/measurement.hpp"
#include "runner/execute/implementation.hpp"
#include "runner/execute/libraries.hpp"
#include "runner/execute/solution.hpp"
#include "core/error.hpp"
#include "kindex/cpu_reference.h"
#include "kindex/kindex.h"

namespace kindex::runner {

std::string Implementation::unsupported_reason(const catalog::Definition& def) const {
  return problem_kind(def) ? "" : "definition " + def.name + " is not a problem kindex can run";
}

namespace {

// A failed C ABI call becomes a RunFailure; a broken CUDA context (sticky error) surfaces first, from the
// synchronisation, so the worker knows to start afresh.
[[noreturn]] void abi_failure(kindex_status status, const char* call, const char* message, Where memory) {
  std::string text = std::string(call) + " returned " + kindex_status_name(status) + ": " + (message ? message : "");
  if (memory == Where::device) device::device_synchronize();
  bool oom =
      text.find("out of memory") != std::string::npos || text.find("cudaErrorMemoryAllocation") != std::string::npos;
  throw RunFailure(oom ? RunStatus::resource_exceeded : RunStatus::runtime_error, text);
}

class CAbiImplementation final : public Implementation {
 public:
  CAbiImplementation(ImplementationInfo info, CAbi abi) : info_(std::move(info)), abi_(abi) {}
  const ImplementationInfo& info() const override { return info_; }
  std::string unsupported_reason(const catalog::Definition& def) const override {
    auto kind = problem_kind(def);
    if (!kind) return Implementation::unsupported_reason(def);
    if (*kind == ProblemKind::paged_decode && !(abi_.decode && abi_.decode_workspace))
      return info_.name + " does not export kindex_paged_decode and kindex_paged_decode_workspace_size";
    if (*kind == ProblemKind::gqa_rope_backward && !(abi_.backward && abi_.backward_workspace))
      return info_.name + " does not export kindex_gqa_rope_backward and kindex_gqa_rope_backward_workspace_size";
    return "";
  }
  size_t workspace_bytes(ProblemKind kind, const CallArgs& args) const override {
    size_t bytes = 0;
    kindex_status s;
    if (kind == ProblemKind::paged_decode) {
      auto p = decode_abi_params(args);
      s = abi_.decode_workspace(&p, &bytes);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_paged_decode_workspace_size", abi_.last_error(), memory());
    } else {
      auto p = backward_abi_params(args);
      s = abi_.backward_workspace(&p, &bytes);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_gqa_rope_backward_workspace_size", abi_.last_error(), memory());
    }
    return bytes;
  }
  void run(ProblemKind kind, const CallArgs& args, void* workspace, size_t workspace_bytes, void* stream) override {
    if (kind == ProblemKind::paged_decode) {
      auto p = decode_abi_params(args);
      kindex_status s = abi_.decode(&p, workspace, workspace_bytes, stream);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_paged_decode", abi_.last_error(), memory());
    } else {
      auto p = backward_abi_params(args);
      kindex_status s = abi_.backward(&p, workspace, workspace_bytes, stream);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_gqa_rope_backward", abi_.last_error(), memory());
    }
  }

 private:
  ImplementationInfo info_;
  CAbi abi_;
};

class CpuReference final : public Implementation {
 public:
  CpuReference() {
    info_ = {"cpu-reference",
             "cpp",
             KINDEX_VERSION,
             "",
             "kindex::reference::paged_decode / gqa_rope_backward",
             "kindex's multithreaded CPU reference (decode in fp64; L2/003 with the upstream bf16 rounding points)",
             false};
  }
  const ImplementationInfo& info() const override { return info_; }
  size_t workspace_bytes(ProblemKind, const CallArgs&) const override { return 0; }
  // Through the references' C ABI (kindex/cpu_reference.h), linked in: NOT_SUPPORTED is its "out of host memory",
  // every other failure (a bad field or index entry, an unexpected error) a runtime error with its message.
  void run(ProblemKind kind, const CallArgs& args, void*, size_t, void*) override {
    kindex_status s;
    if (kind == ProblemKind::paged_decode) {
      auto p = decode_abi_params(args);
      s = kindex_cpu_reference_paged_decode(&p);
    } else {
      auto p = backward_abi_params(args);
      s = kindex_cpu_reference_gqa_rope_backward(&p);
    }
    if (s == KINDEX_STATUS_OK) return;
    throw RunFailure(s == KINDEX_STATUS_NOT_SUPPORTED ? RunStatus::resource_exceeded : RunStatus::runtime_error,
                     std::string("cpu-reference: ") + kindex_cpu_reference_last_error());
  }

 private:
  ImplementationInfo info_;
};

// An implementation whose library this build does not have (the GPU reference without CUDA): every run fails
// saying so, as a run's runtime_error rather than a bad argument.
class Unavailable final : public Implementation {
 public:
  Unavailable(ImplementationInfo info, std::string why) : info_(std::move(info)), why_(std::move(why)) {}
  const ImplementationInfo& info() const override { return info_; }
  size_t workspace_bytes(ProblemKind, const CallArgs&) const override { return 0; }
  void run(ProblemKind, const CallArgs&, void*, size_t, void*) override {
    throw RunFailure(RunStatus::runtime_error, info_.name + ": " + why_);
  }

 private:
  ImplementationInfo info_;
  std::string why_;
};

// kindex's own libraries in library_dir(), run through their C ABI like anyone's.
std::unique_ptr<Implementation> make_own_library(ImplementationInfo info, const std::string& file) {
  const std::string path = library_dir() + "/" + file;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return std::make_unique<Unavailable>(std::move(info), "no " + path + " (built without CUDA?)");
  CAbi abi = load_c_abi(path, "kindex bench", "--impl", info.name);
  info.version = abi.version ? abi.version() : "";
  info.path = path;
  return std::make_unique<CAbiImplementation>(std::move(info), abi);
}

std::unique_ptr<Implementation> make_kindex() {
  return make_own_library({"kindex", "cuda", "", "", "kindex_paged_decode / kindex_gqa_rope_backward",
                           "kindex's CUDA kernels through the C ABI (include/kindex/kindex.h, libkindex.so)"},
                          "libkindex.so");
}

std::unique_ptr<Implementation> make_gpu_reference() {
  return make_own_library({"gpu-reference", "cuda", "", "", "kindex_paged_decode / kindex_gqa_rope_backward",
                           "kindex's simple GPU reference (libkindex_gpu_reference.so): decode one block per "
                           "(sequence, head) in fp32; L2/003 op by op with cuBLASLt GEMMs at the upstream rounding "
                           "points"},
                          "libkindex_gpu_reference.so");
}

constexpr const char* kExternalPrefix = "external:";

std::unique_ptr<Implementation> make_external(const std::string& spec) {
  const std::string path = spec.substr(std::string(kExternalPrefix).size());
  if (path.empty())
    throw Error("kindex bench", "--impl", spec, "external: needs a shared library path, e.g. external:./libmy.so");
  CAbi abi = load_c_abi(path, "kindex bench", "--impl", spec);
  std::error_code ec;
  ImplementationInfo info;
  info.name = spec;
  info.language = "c_abi";
  info.version = abi.version ? abi.version() : "";
  info.path = std::filesystem::absolute(path, ec).string();
  info.symbol = "kindex_paged_decode / kindex_gqa_rope_backward";
  info.description = "external library exporting kindex's C ABI: " + path;
  info.on_device = !(abi.host_pointers && abi.host_pointers() != 0);
  return std::make_unique<CAbiImplementation>(std::move(info), abi);
}

}  // namespace

const std::vector<std::string>& builtin_implementation_names() {
  static const std::vector<std::string> names = {"kindex", "gpu-reference", "cpu-reference"};
  return names;
}

void check_implementation_spec(const std::string& spec) {
  if (spec.rfind(kExternalPrefix, 0) == 0) {
    make_external(spec);  // loads and checks the symbols: a bad library is a bad argument
    return;
  }
  if (is_solution_spec(spec)) {
    check_solution_spec(spec);  // reads and checks the file: a bad solution is a bad argument
    return;
  }
  for (const auto& n : builtin_implementation_names())
    if (spec == n) return;
  throw Error("kindex bench", "--impl", spec,
              "unknown implementation (kindex, gpu-reference, cpu-reference, " + peer_names_text() +
                  ", external:PATH.so or solution:PATH.json)");
}

std::unique_ptr<Implementation> make_implementation(const std::string& spec) {
  if (spec == "kindex") return make_kindex();
  if (spec == "gpu-reference") return make_gpu_reference();
  if (spec == "cpu-reference") return std::make_unique<CpuReference>();
  if (spec.rfind(kExternalPrefix, 0) == 0) return make_external(spec);
  if (is_solution_spec(spec)) return make_solution_implementation(spec);
  check_implementation_spec(spec);  // throws the error naming the argument
  return nullptr;
}

}  // namespace kindex::runner
