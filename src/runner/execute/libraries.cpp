#include "runner/execute/libraries.hpp"

#include <dlfcn.h>

#include <filesystem>

#include "core/symbols.hpp"
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
  CAbi abi;
  abi.handle = handle;
  resolve(handle, abi.decode, "kindex_paged_decode");
  resolve(handle, abi.decode_workspace, "kindex_paged_decode_workspace_size");
  resolve(handle, abi.backward, "kindex_gqa_rope_backward");
  resolve(handle, abi.backward_workspace, "kindex_gqa_rope_backward_workspace_size");
  resolve(handle, abi.last_error, "kindex_last_error");
  resolve(handle, abi.version, "kindex_version");
  resolve(handle, abi.host_pointers, "kindex_abi_host_pointers");
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

// One table of entry points of the GPU reference library, bound once: nullptr where the library or a symbol is
// missing.
template <class Table>
const Table* bind_once(bool (*bind)(void* handle, Table& table)) {
  static const Table* bound = [bind]() -> const Table* {
    void* handle = gpu_reference_handle();
    static Table table;
    return handle && bind(handle, table) ? &table : nullptr;
  }();
  return bound;
}

}  // namespace

const Calibration* calibration() {
  return bind_once<Calibration>([](void* h, Calibration& c) {
    return resolve(h, c.measure_rates, "kindex_gpu_reference_measure_rates") &&
           resolve(h, c.nvcc_version, "kindex_gpu_reference_nvcc_version") &&
           resolve(h, c.cublaslt_version, "kindex_gpu_reference_cublaslt_version");
  });
}

const DeviceGenerator* device_generator() {
  return bind_once<DeviceGenerator>([](void* h, DeviceGenerator& g) {
    return resolve(h, g.fill_random, "kindex_gpu_reference_fill_random") &&
           resolve(h, g.last_error, "kindex_last_error");
  });
}

const DeviceComparator* device_comparator() {
  return bind_once<DeviceComparator>([](void* h, DeviceComparator& c) {
    return resolve(h, c.compare, "kindex_gpu_reference_compare") && resolve(h, c.last_error, "kindex_last_error");
  });
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
