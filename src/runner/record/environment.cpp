#include "runner/record/environment.hpp"

#include <dlfcn.h>
#include <sys/utsname.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "runner/measurement.hpp"
#include "runner/record/json_fields.hpp"
#include "core/parallel.hpp"
#include "kindex/kindex.h"

#ifdef KINDEX_HAVE_CUDA
#include <cuda_runtime.h>

#include "runner/execute/libraries.hpp"
#endif

namespace kindex::runner {

namespace {

std::string first_line_matching(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find_first_of(":=", key.size());
      std::string v = colon == std::string::npos ? line : line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t\""));
      while (!v.empty() && (v.back() == '"' || v.back() == ' ')) v.pop_back();
      return v;
    }
  return "";
}

std::string version_string(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string host_compiler() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return "gcc " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

#ifdef KINDEX_HAVE_CUDA
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi and NVML spell a GPU's UUID.
std::string uuid_text(const unsigned char* b) {
  std::string out = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(hex, sizeof hex, "%02x", b[i]);
    out += hex;
  }
  return out;
}

// The few NVML entry points used, declared here (nvml.h is not part of the toolkit's default headers).
using NvmlDevice = void*;
struct Nvml {
  int (*init)() = nullptr;
  int (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  int (*handle_by_uuid)(const char*, NvmlDevice*) = nullptr;
  int (*clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*persistence)(NvmlDevice, int*) = nullptr;
  int (*ecc)(NvmlDevice, int*, int*) = nullptr;
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  int (*event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
};
constexpr int kNvmlClockSm = 1, kNvmlClockMem = 2;
// nvmlClocksEventReasonApplicationsClocksSetting: the clocks are held by an application-clock or locked-clock
// setting (nvidia-smi -ac / -lgc) rather than boosting freely.
constexpr unsigned long long kNvmlReasonApplicationsClocks = 0x2ull;

bool capture_nvml(Environment& e) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  Nvml n;
  auto load = [&](auto& fn, const char* a, const char* b = nullptr) {
    void* p = dlsym(h, a);
    if (!p && b) p = dlsym(h, b);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  load(n.init, "nvmlInit_v2");
  load(n.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  load(n.handle_by_uuid, "nvmlDeviceGetHandleByUUID");
  load(n.clock_info, "nvmlDeviceGetClockInfo");
  load(n.max_clock_info, "nvmlDeviceGetMaxClockInfo");
  load(n.driver_version, "nvmlSystemGetDriverVersion");
  load(n.persistence, "nvmlDeviceGetPersistenceMode");
  load(n.ecc, "nvmlDeviceGetEccMode");
  load(n.power_limit, "nvmlDeviceGetPowerManagementLimit");
  load(n.event_reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!n.init || !n.handle_by_index || n.init() != 0) return false;
  // By UUID: NVML numbers the host's GPUs, CUDA only those CUDA_VISIBLE_DEVICES shows (a worker pinned to one).
  NvmlDevice dev = nullptr;
  if (e.gpu_uuid.empty() || !n.handle_by_uuid || n.handle_by_uuid(e.gpu_uuid.c_str(), &dev) != 0) {
    int cuda_device = 0;
    cudaGetDevice(&cuda_device);
    if (n.handle_by_index(unsigned(cuda_device), &dev) != 0) return false;
  }
  unsigned v = 0;
  if (n.clock_info && n.clock_info(dev, kNvmlClockSm, &v) == 0) e.sm_clock_mhz = int(v);
  if (n.clock_info && n.clock_info(dev, kNvmlClockMem, &v) == 0) e.memory_clock_mhz = int(v);
  if (n.max_clock_info && n.max_clock_info(dev, kNvmlClockSm, &v) == 0) e.sm_clock_max_mhz = int(v);
  if (n.max_clock_info && n.max_clock_info(dev, kNvmlClockMem, &v) == 0) e.memory_clock_max_mhz = int(v);
  char buf[96] = {};
  if (n.driver_version && n.driver_version(buf, sizeof buf) == 0) e.driver_version = buf;
  int mode = 0, pending = 0;
  if (n.persistence && n.persistence(dev, &mode) == 0) e.persistence_mode = mode != 0;
  if (n.ecc && n.ecc(dev, &mode, &pending) == 0) e.ecc_enabled = mode != 0;
  if (n.power_limit && n.power_limit(dev, &v) == 0) e.power_limit_watts = v / 1000.0;
  unsigned long long reasons = 0;
  if (n.event_reasons && n.event_reasons(dev, &reasons) == 0)
    e.clocks_locked = (reasons & kNvmlReasonApplicationsClocks) != 0;
  e.clock_source = "nvml";
  return true;
}

// nvidia-smi as the second source of clocks and the driver version.
bool capture_nvidia_smi(Environment& e) {
  const std::string which = e.gpu_uuid.empty() ? "" : " -i " + e.gpu_uuid;  // this process's GPU (see capture_nvml)
  FILE* p = popen(("nvidia-smi" + which +
                   " --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,driver_version "
                   "--format=csv,noheader,nounits 2>/dev/null")
                      .c_str(),
                  "r");
  if (!p) return false;
  std::array<char, 256> buf{};
  std::string line = fgets(buf.data(), int(buf.size()), p) ? buf.data() : "";
  pclose(p);
  std::stringstream ss(line);
  std::string field;
  std::vector<std::string> f;
  while (std::getline(ss, field, ',')) f.push_back(field.substr(field.find_first_not_of(' ')));
  if (f.size() < 5) return false;
  try {
    e.sm_clock_mhz = std::stoi(f[0]), e.sm_clock_max_mhz = std::stoi(f[1]);
    e.memory_clock_mhz = std::stoi(f[2]), e.memory_clock_max_mhz = std::stoi(f[3]);
  } catch (const std::exception&) {
    return false;
  }
  while (!f[4].empty() && (f[4].back() == '\n' || f[4].back() == ' ')) f[4].pop_back();
  e.driver_version = f[4];
  e.clock_source = "nvidia-smi";
  return true;
}

void capture_gpu(Environment& e) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return;
  }
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return;
  e.has_gpu = true;
  e.gpu_name = prop.name;
  e.architecture = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  e.sm_count = prop.multiProcessorCount;
  e.memory_bytes = int64_t(prop.totalGlobalMem);
  e.l2_bytes = prop.l2CacheSize;
  e.gpu_uuid = uuid_text(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) e.cuda_driver_version = version_string(v);
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) e.cuda_runtime_version = version_string(v);
  if (!capture_nvml(e) && !capture_nvidia_smi(e)) {
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) == cudaSuccess) e.sm_clock_max_mhz = khz / 1000;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess)
      e.memory_clock_max_mhz = khz / 1000;
    e.clock_source = "cudaDeviceProp (max only)";
  }
  if (const Calibration* c = calibration()) e.libraries["cublaslt"] = c->cublaslt_version();
  std::string cupti = cupti_version();
  if (!cupti.empty()) e.libraries["cupti"] = cupti;
}
#endif

}  // namespace

Environment capture_environment() {
  Environment e;
  e.kindex_version = KINDEX_VERSION;
#ifdef KINDEX_GIT_COMMIT
  e.kindex_commit = KINDEX_GIT_COMMIT;
#else
  e.kindex_commit = "unknown";
#endif
  e.host_compiler = host_compiler();
#ifdef KINDEX_HAVE_CUDA
  e.cuda_toolkit = version_string(CUDART_VERSION);
  if (const Calibration* c = calibration()) e.nvcc = c->nvcc_version();
  capture_gpu(e);
#endif
  e.cpu_model = first_line_matching("/proc/cpuinfo", "model name");
  e.cpu_threads = hardware_threads();
  e.operating_system = first_line_matching("/etc/os-release", "PRETTY_NAME");
  utsname u{};
  if (uname(&u) == 0) e.kernel = std::string(u.sysname) + " " + u.release;
  return e;
}

namespace {

// Every member under its own name (the optional NVML settings only when known).
constexpr auto kEnvironmentFields = KINDEX_JSON_FIELDS(
    Environment, has_gpu, gpu_name, gpu_uuid, architecture, sm_count, memory_bytes, l2_bytes, sm_clock_mhz,
    sm_clock_max_mhz, memory_clock_mhz, memory_clock_max_mhz, clock_source, driver_version, cuda_driver_version,
    cuda_runtime_version, cuda_toolkit, nvcc, host_compiler, libraries, kindex_version, kindex_commit, cpu_model,
    cpu_threads, operating_system, kernel, clocks_locked, persistence_mode, ecc_enabled, power_limit_watts);

}  // namespace

nlohmann::json Environment::to_json() const { return fields_to_json(*this, kEnvironmentFields); }
Environment Environment::from_json(const nlohmann::json& j) { return fields_from_json<Environment>(j, kEnvironmentFields); }

}  // namespace kindex::runner
