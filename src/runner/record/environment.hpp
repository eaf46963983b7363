#pragma once
// Where a run happened, captured at run time: the GPU (name, architecture, SMs, memory, L2, current and max
// clocks, whether clocks are locked, persistence, ECC, power limit — NVML via dlopen of libnvidia-ml.so.1 when
// present, else cudaDeviceProp and nvidia-smi), the driver, CUDA runtime and toolkit, the compilers and library
// versions baked into this build, kindex's version and git commit; without a GPU the CPU model and thread count.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kindex::runner {

struct Environment {
  bool has_gpu = false;
  // GPU
  std::string gpu_name;      // "NVIDIA H200"
  std::string gpu_uuid;      // "GPU-…" (which of a host's GPUs; outside the ExecutionEnvironment, which is per model)
  std::string architecture;  // "sm_90"
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  int sm_clock_mhz = 0, sm_clock_max_mhz = 0, memory_clock_mhz = 0, memory_clock_max_mhz = 0;
  std::optional<bool> clocks_locked, persistence_mode, ecc_enabled;
  std::optional<double> power_limit_watts;
  std::string clock_source;  // "nvml" | "nvidia-smi" | "cudaDeviceProp (max only)"
  std::string driver_version, cuda_driver_version, cuda_runtime_version;
  // build
  std::string cuda_toolkit, nvcc, host_compiler;
  std::map<std::string, std::string> libraries;  // cublaslt, cupti (KernelIndex key spelling: ^[a-z][a-z0-9_]*$)
  std::string kindex_version, kindex_commit;
  // host
  std::string cpu_model, operating_system, kernel;
  int cpu_threads = 0;

  // The GPU the floors are computed for: this one, or the project's target (H200) on a machine without one.
  std::string floor_target() const { return has_gpu ? gpu_name : "NVIDIA H200"; }
  nlohmann::json to_json() const;
  static Environment from_json(const nlohmann::json& j);
};

// Captures the environment of this process's device 0 (initialises CUDA when there is a GPU).
Environment capture_environment();

}  // namespace kindex::runner
