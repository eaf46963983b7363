// The implementations behind bench/implementation.hpp.
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "bench/device.hpp"
#include "bench/implementation.hpp"
#include "core/error.hpp"
#include "kindex/kindex.h"
#include "reference/reference.hpp"

#ifdef KINDEX_HAVE_CUDA
#include "kernels/gpu_reference/gpu_reference.hpp"
#endif

namespace kindex::bench {

std::string Implementation::unsupported_reason(const catalog::Definition& def) const {
  return problem_kind(def) ? "" : "definition " + def.name + " is not a problem kindex can run";
}

namespace {

std::string abi_status_name(kindex_status s) {
  switch (s) {
    case KINDEX_STATUS_OK:
      return "ok";
    case KINDEX_STATUS_INVALID_ARGUMENT:
      return "invalid_argument";
    case KINDEX_STATUS_NOT_SUPPORTED:
      return "not_supported";
    case KINDEX_STATUS_WORKSPACE_TOO_SMALL:
      return "workspace_too_small";
    case KINDEX_STATUS_CUDA_ERROR:
      return "cuda_error";
    case KINDEX_STATUS_INVALID_INPUT:
      return "invalid_input";
  }
  return "status " + std::to_string(int(s));
}

// A failed C ABI call becomes a RunFailure; a broken CUDA context (sticky error) surfaces first, from the
// synchronisation, so the worker knows to start afresh.
[[noreturn]] void abi_failure(kindex_status status, const char* call, const char* message, Where memory) {
  std::string text = std::string(call) + " returned " + abi_status_name(status) + ": " + (message ? message : "");
  if (memory == Where::device) device::device_synchronize();
  bool oom =
      text.find("out of memory") != std::string::npos || text.find("cudaErrorMemoryAllocation") != std::string::npos;
  throw RunFailure(oom ? RunStatus::resource_exceeded : RunStatus::runtime_error, text);
}

// Function pointers of kindex's C ABI: the linked kindex kernels, or an external library's.
struct CAbi {
  decltype(&kindex_paged_decode) decode = nullptr;
  decltype(&kindex_paged_decode_workspace_size) decode_workspace = nullptr;
  decltype(&kindex_gqa_rope_backward) backward = nullptr;
  decltype(&kindex_gqa_rope_backward_workspace_size) backward_workspace = nullptr;
  decltype(&kindex_last_error) last_error = nullptr;
};

class CAbiImplementation final : public Implementation {
 public:
  CAbiImplementation(ImplementationInfo info, CAbi abi, Where memory)
      : info_(std::move(info)), abi_(abi), memory_(memory) {}
  const ImplementationInfo& info() const override { return info_; }
  Where memory() const override { return memory_; }
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
      auto p = decode_params(args);
      s = abi_.decode_workspace(&p, &bytes);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_paged_decode_workspace_size", abi_.last_error(), memory_);
    } else {
      auto p = backward_params(args);
      s = abi_.backward_workspace(&p, &bytes);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_gqa_rope_backward_workspace_size", abi_.last_error(), memory_);
    }
    return bytes;
  }
  void run(ProblemKind kind, const CallArgs& args, void* workspace, size_t workspace_bytes, void* stream) override {
    if (kind == ProblemKind::paged_decode) {
      auto p = decode_params(args);
      kindex_status s = abi_.decode(&p, workspace, workspace_bytes, stream);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_paged_decode", abi_.last_error(), memory_);
    } else {
      auto p = backward_params(args);
      kindex_status s = abi_.backward(&p, workspace, workspace_bytes, stream);
      if (s != KINDEX_STATUS_OK) abi_failure(s, "kindex_gqa_rope_backward", abi_.last_error(), memory_);
    }
  }

 private:
  ImplementationInfo info_;
  CAbi abi_;
  Where memory_;
};

class CpuReference final : public Implementation {
 public:
  CpuReference() {
    info_ = {"cpu-reference",
             "cpp",
             kindex_version(),
             "",
             "kindex::reference::paged_decode / gqa_rope_backward",
             "kindex's multithreaded CPU reference (decode in fp64; L2/003 with the upstream bf16 rounding points)"};
  }
  const ImplementationInfo& info() const override { return info_; }
  Where memory() const override { return Where::host; }
  size_t workspace_bytes(ProblemKind, const CallArgs&) const override { return 0; }
  void run(ProblemKind kind, const CallArgs& args, void*, size_t, void*) override {
    try {
      if (kind == ProblemKind::paged_decode)
        reference::paged_decode(decode_params(args));
      else
        reference::gqa_rope_backward(backward_params(args));
    } catch (const std::bad_alloc&) {
      throw RunFailure(RunStatus::resource_exceeded, "cpu-reference: out of host memory");
    } catch (const Error& e) {
      throw RunFailure(RunStatus::runtime_error, std::string("cpu-reference: ") + e.what());
    }
  }

 private:
  ImplementationInfo info_;
};

class GpuReference final : public Implementation {
 public:
  GpuReference() {
    info_ = {"gpu-reference",
             "cuda",
             kindex_version(),
             "",
             "kindex::gpu_reference::paged_decode / gqa_rope_backward",
             "kindex's simple GPU reference: decode one block per (sequence, head) in fp32; L2/003 op by op with "
             "cuBLASLt GEMMs at the upstream rounding points"};
  }
  const ImplementationInfo& info() const override { return info_; }
  Where memory() const override { return Where::device; }
  size_t workspace_bytes(ProblemKind kind, const CallArgs& args) const override {
#ifdef KINDEX_HAVE_CUDA
    if (kind == ProblemKind::gqa_rope_backward) {
      auto p = backward_params(args);
      return gpu_reference::gqa_rope_backward_workspace_bytes(p.batch_size, p.seq_len);
    }
#else
    (void)kind, (void)args;
#endif
    return 0;
  }
  void run(ProblemKind kind, const CallArgs& args, void* workspace, size_t workspace_bytes, void* stream) override {
#ifdef KINDEX_HAVE_CUDA
    kindex_status s = kind == ProblemKind::paged_decode
                          ? gpu_reference::paged_decode(decode_params(args), stream)
                          : gpu_reference::gqa_rope_backward(backward_params(args), workspace, workspace_bytes, stream);
    if (s != KINDEX_STATUS_OK) abi_failure(s, "gpu-reference", kindex_last_error(), Where::device);
#else
    (void)kind, (void)args, (void)workspace, (void)workspace_bytes, (void)stream;
    throw RunFailure(RunStatus::runtime_error, "gpu-reference: kindex was built without CUDA");
#endif
  }

 private:
  ImplementationInfo info_;
};

std::unique_ptr<Implementation> make_kindex() {
  CAbi abi{kindex_paged_decode, kindex_paged_decode_workspace_size, kindex_gqa_rope_backward,
           kindex_gqa_rope_backward_workspace_size, kindex_last_error};
  ImplementationInfo info{"kindex",
                          "cuda",
                          kindex_version(),
                          "",
                          "kindex_paged_decode / kindex_gqa_rope_backward",
                          "kindex's CUDA kernels through the C ABI (include/kindex/kindex.h)"};
  return std::make_unique<CAbiImplementation>(std::move(info), abi, Where::device);
}

constexpr const char* kExternalPrefix = "external:";

std::unique_ptr<Implementation> make_external(const std::string& spec) {
  const std::string path = spec.substr(std::string(kExternalPrefix).size());
  if (path.empty())
    throw Error("kindex bench", "--impl", spec, "external: needs a shared library path, e.g. external:./libmy.so");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error("kindex bench", "--impl", spec, "no such shared library file: " + path);
  // Path-qualified so dlopen never searches LD_LIBRARY_PATH for a bare name.
  std::string qualified = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(qualified.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error("kindex bench", "--impl", spec, std::string("cannot load: ") + dlerror());
  auto sym = [&](const char* name) { return dlsym(handle, name); };
  CAbi abi;
  abi.decode = reinterpret_cast<decltype(abi.decode)>(sym("kindex_paged_decode"));
  abi.decode_workspace = reinterpret_cast<decltype(abi.decode_workspace)>(sym("kindex_paged_decode_workspace_size"));
  abi.backward = reinterpret_cast<decltype(abi.backward)>(sym("kindex_gqa_rope_backward"));
  abi.backward_workspace =
      reinterpret_cast<decltype(abi.backward_workspace)>(sym("kindex_gqa_rope_backward_workspace_size"));
  abi.last_error = reinterpret_cast<decltype(abi.last_error)>(sym("kindex_last_error"));
  if (!abi.last_error) throw Error("kindex bench", "--impl", spec, "the library does not export kindex_last_error");
  if (!(abi.decode && abi.decode_workspace) && !(abi.backward && abi.backward_workspace))
    throw Error("kindex bench", "--impl", spec,
                "the library exports neither kindex_paged_decode (+ _workspace_size) nor kindex_gqa_rope_backward "
                "(+ _workspace_size)");
  // Optional: a library for the CPU says so, and then gets host pointers.
  auto host_pointers = reinterpret_cast<int (*)()>(sym("kindex_abi_host_pointers"));
  auto version = reinterpret_cast<const char* (*)()>(sym("kindex_version"));
  ImplementationInfo info;
  info.name = spec;
  info.language = "c_abi";
  info.version = version ? version() : "";
  info.path = std::filesystem::absolute(path, ec).string();
  info.symbol = "kindex_paged_decode / kindex_gqa_rope_backward";
  info.description = "external library exporting kindex's C ABI: " + path;
  Where memory = host_pointers && host_pointers() != 0 ? Where::host : Where::device;
  return std::make_unique<CAbiImplementation>(std::move(info), abi, memory);
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
  for (const auto& n : builtin_implementation_names())
    if (spec == n) return;
  throw Error("kindex bench", "--impl", spec,
              "unknown implementation (kindex, gpu-reference, cpu-reference or external:PATH.so)");
}

std::unique_ptr<Implementation> make_implementation(const std::string& spec) {
  if (spec == "kindex") return make_kindex();
  if (spec == "gpu-reference") return std::make_unique<GpuReference>();
  if (spec == "cpu-reference") return std::make_unique<CpuReference>();
  if (spec.rfind(kExternalPrefix, 0) == 0) return make_external(spec);
  check_implementation_spec(spec);  // throws the error naming the argument
  return nullptr;
}

}  // namespace kindex::bench
