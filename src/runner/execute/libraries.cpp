#include "runner/execute/libraries.hpp"

#include <dlfcn.h>

#include <filesystem>

#include "runner/record/run_result.hpp"

namespace kindex::runner {

std::string library_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "lib";
  return (exe.parent_path().parent_path() / "lib").string();
}

CAbi load_c_abi(const std::string& path, const std::string& where, const std::string& field,
                const std::string& value) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(where, field, value, "no such shared library file: " + path);
  const std::string qualified = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(qualified.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error(where, field, value, std::string("cannot load: ") + dlerror());
  auto sym = [&](const char* name) { return dlsym(handle, name); };
  CAbi abi;
  abi.handle = handle;
  abi.decode = reinterpret_cast<decltype(abi.decode)>(sym("kindex_paged_decode"));
  abi.decode_workspace = reinterpret_cast<decltype(abi.decode_workspace)>(sym("kindex_paged_decode_workspace_size"));
  abi.backward = reinterpret_cast<decltype(abi.backward)>(sym("kindex_gqa_rope_backward"));
  abi.backward_workspace =
      reinterpret_cast<decltype(abi.backward_workspace)>(sym("kindex_gqa_rope_backward_workspace_size"));
  abi.last_error = reinterpret_cast<decltype(abi.last_error)>(sym("kindex_last_error"));
  abi.version = reinterpret_cast<decltype(abi.version)>(sym("kindex_version"));
  abi.host_pointers = reinterpret_cast<decltype(abi.host_pointers)>(sym("kindex_abi_host_pointers"));
  if (!abi.last_error) throw Error(where, field, value, "the library does not export kindex_last_error");
  if (!(abi.decode && abi.decode_workspace) && !(abi.backward && abi.backward_workspace))
    throw Error(where, field, value,
                "the library exports neither kindex_paged_decode (+ _workspace_size) nor kindex_gqa_rope_backward "
                "(+ _workspace_size)");
  return abi;
}

namespace {

// libkindex_gpu_reference.so, loaded once (nullptr where this build has none).
void* gpu_reference_handle() {
  static void* handle = dlopen((library_dir() + "/libkindex_gpu_reference.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  return handle;
}

}  // namespace

const Calibration* calibration() {
  static const Calibration* loaded = []() -> const Calibration* {
    void* handle = gpu_reference_handle();
    if (!handle) return nullptr;
    static Calibration c;
    c.measure_rates = reinterpret_cast<decltype(c.measure_rates)>(dlsym(handle, "kindex_gpu_reference_measure_rates"));
    c.nvcc_version = reinterpret_cast<decltype(c.nvcc_version)>(dlsym(handle, "kindex_gpu_reference_nvcc_version"));
    c.cublaslt_version =
        reinterpret_cast<decltype(c.cublaslt_version)>(dlsym(handle, "kindex_gpu_reference_cublaslt_version"));
    return c.measure_rates && c.nvcc_version && c.cublaslt_version ? &c : nullptr;
  }();
  return loaded;
}

const DeviceGenerator* device_generator() {
  static const DeviceGenerator* loaded = []() -> const DeviceGenerator* {
    void* handle = gpu_reference_handle();
    if (!handle) return nullptr;
    static DeviceGenerator g;
    g.fill_random = reinterpret_cast<decltype(g.fill_random)>(dlsym(handle, "kindex_gpu_reference_fill_random"));
    g.last_error = reinterpret_cast<decltype(g.last_error)>(dlsym(handle, "kindex_last_error"));
    return g.fill_random && g.last_error ? &g : nullptr;
  }();
  return loaded;
}

const DeviceComparator* device_comparator() {
  static const DeviceComparator* loaded = []() -> const DeviceComparator* {
    void* handle = gpu_reference_handle();
    if (!handle) return nullptr;
    static DeviceComparator c;
    c.compare = reinterpret_cast<decltype(c.compare)>(dlsym(handle, "kindex_gpu_reference_compare"));
    c.last_error = reinterpret_cast<decltype(c.last_error)>(dlsym(handle, "kindex_last_error"));
    return c.compare && c.last_error ? &c : nullptr;
  }();
  return loaded;
}

kindex_random_fill random_fill_abi(const catalog::RandomFill& f, uint64_t seed) {
  using Kind = catalog::RandomFill::Kind;
  kindex_random_fill abi{};
  abi.kind = f.kind == Kind::normal         ? KINDEX_RANDOM_NORMAL
             : f.kind == Kind::cos_of_angle ? KINDEX_RANDOM_COS_OF_ANGLE
             : f.kind == Kind::sin_of_angle ? KINDEX_RANDOM_SIN_OF_ANGLE
                                            : KINDEX_RANDOM_SOFTMAX_ROWS;
  switch (f.dtype) {
    case DType::bf16: abi.dtype = KINDEX_DTYPE_BF16; break;
    case DType::f16: abi.dtype = KINDEX_DTYPE_FP16; break;
    case DType::f32: abi.dtype = KINDEX_DTYPE_FP32; break;
    default:
      throw RunFailure(RunStatus::runtime_error, "no device generator for dtype " + std::string(dtype_name(f.dtype)));
  }
  abi.numel = shape_numel(f.shape);
  abi.seed = seed;
  abi.stream = f.stream;
  abi.scale = f.scale;
  abi.row = f.row;
  abi.pages_used = f.pages_used.empty() ? nullptr : f.pages_used.data();
  abi.num_pages = int64_t(f.pages_used.size());
  abi.page_elems = f.page_elems;
  return abi;
}

}  // namespace kindex::runner
