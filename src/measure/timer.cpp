#include "measure/timer.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/symbols.hpp"
#include "measure/device.hpp"

#ifdef KINDEX_HAVE_CUDA
#include <cuda_runtime.h>
#include <cupti.h>
#endif

namespace kindex::measure {

TimingSamples time_host(const TimingProtocol& protocol, const std::function<void()>& prepare,
                        const std::function<void()>& call) {
  for (int i = 0; i < protocol.untimed + protocol.warmup; ++i) {
    prepare();
    call();
  }
  TimingSamples r;
  r.timer = "wall_clock";
  for (int i = 0; i < protocol.iterations; ++i) {
    prepare();
    auto t0 = std::chrono::steady_clock::now();
    call();
    auto t1 = std::chrono::steady_clock::now();
    r.ns.push_back(double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  }
  return r;
}

#ifdef KINDEX_HAVE_CUDA

namespace {

// libcupti, loaded at run time so the binary needs no CUPTI to start (events are the fallback).
struct Cupti {
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetVersion) version = nullptr;
  std::string error;
  bool ok = false;
};

const Cupti& cupti() {
  static const Cupti lib = [] {
    Cupti c;
    std::vector<std::string> names;
    if (const char* env = std::getenv("KINDEX_CUPTI_LIBRARY")) names.push_back(env);
    for (const char* n :
         {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so",
          "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"})
      names.push_back(n);
    void* handle = nullptr;
    for (const auto& n : names)
      if ((handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!handle) {
      c.error = "libcupti not found (tried KINDEX_CUPTI_LIBRARY, libcupti.so.13, /usr/local/cuda)";
      return c;
    }
    auto load = [&](auto& fn, const char* symbol) {
      if (!resolve(handle, fn, symbol) && c.error.empty()) c.error = std::string("libcupti lacks ") + symbol;
    };
    load(c.enable, "cuptiActivityEnable");
    load(c.disable, "cuptiActivityDisable");
    load(c.register_callbacks, "cuptiActivityRegisterCallbacks");
    load(c.flush_all, "cuptiActivityFlushAll");
    load(c.next_record, "cuptiActivityGetNextRecord");
    load(c.timestamp, "cuptiGetTimestamp");
    load(c.result_string, "cuptiGetResultString");
    load(c.version, "cuptiGetVersion");
    c.ok = c.error.empty();
    return c;
  }();
  return lib;
}

struct Span {
  uint64_t start, end;
};

// Completed activity records land here from CUPTI's thread.
std::mutex g_spans_mutex;
std::vector<Span> g_spans;
constexpr size_t kActivityBufferBytes = 8 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kActivityBufferBytes));
  *size = *buffer ? kActivityBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Span> spans;
  CUpti_Activity* record = nullptr;
  while (cupti().next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
        spans.push_back({k->start, k->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
        spans.push_back({m->start, m->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(record);
        spans.push_back({m->start, m->end});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_spans_mutex);
  g_spans.insert(g_spans.end(), spans.begin(), spans.end());
}

const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET};

// Enables collection for the lifetime of the object; the error string says why not when it could not.
class CuptiSession {
 public:
  CuptiSession() {
    const Cupti& c = cupti();
    if (!c.ok) {
      error_ = c.error;
      return;
    }
    static std::once_flag registered;
    static CUptiResult reg = CUPTI_SUCCESS;
    std::call_once(registered, [&] { reg = c.register_callbacks(buffer_requested, buffer_completed); });
    if (reg != CUPTI_SUCCESS) {
      error_ = "cuptiActivityRegisterCallbacks: " + result(reg);
      return;
    }
    for (auto kind : kKinds) {
      CUptiResult r = c.enable(kind);
      if (r != CUPTI_SUCCESS) {
        error_ = "cuptiActivityEnable: " + result(r);
        disable();
        return;
      }
    }
    active_ = true;
    std::lock_guard<std::mutex> lock(g_spans_mutex);
    g_spans.clear();
  }
  ~CuptiSession() { disable(); }
  bool active() const { return active_; }
  const std::string& error() const { return error_; }
  uint64_t now() const {
    uint64_t t = 0;
    cupti().timestamp(&t);
    return t;
  }
  std::vector<Span> collect() {
    cupti().flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lock(g_spans_mutex);
    std::vector<Span> s;
    s.swap(g_spans);
    return s;
  }

 private:
  static std::string result(CUptiResult r) {
    const char* s = nullptr;
    cupti().result_string(r, &s);
    return s ? s : std::to_string(int(r));
  }
  void disable() {
    if (!cupti().ok) return;
    for (auto kind : kKinds) cupti().disable(kind);
    active_ = false;
  }
  bool active_ = false;
  std::string error_;
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    device::check(cudaEventCreate(&start), "cudaEventCreate");
    device::check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

}  // namespace

bool cupti_available(std::string* why_not) {
  if (why_not) *why_not = cupti().error;
  return cupti().ok;
}

std::string cupti_version() {
  if (!cupti().ok) return "";
  uint32_t v = 0;
  if (cupti().version(&v) != CUPTI_SUCCESS) return "";
  return "api " + std::to_string(v);
}

namespace {

// The buffer zeroed before each call for a cold L2 (2 x L2), allocated once per process rather than per trial.
const device::Buffer& l2_flush_buffer() {
  static const device::Buffer buffer(2 * device::l2_cache_bytes());
  return buffer;
}

}  // namespace

TimingSamples time_device(const TimingProtocol& protocol, const std::function<void()>& prepare,
                          const std::function<void()>& call, void* stream, bool prefer_cupti) {
  static const device::Buffer no_flush;
  const device::Buffer& flush = protocol.cold_l2 ? l2_flush_buffer() : no_flush;
  auto prepare_iteration = [&] {
    prepare();
    if (protocol.cold_l2) {
      device::check(cudaCtxResetPersistingL2Cache(), "cudaCtxResetPersistingL2Cache");
      device::memset_async(flush.get(), 0, flush.bytes(), stream);
    }
    device::synchronize(stream);
  };
  for (int i = 0; i < protocol.untimed + protocol.warmup; ++i) {
    prepare_iteration();
    call();
  }
  device::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  TimingSamples r;
  std::unique_ptr<CuptiSession> session;
  if (prefer_cupti) {
    session = std::make_unique<CuptiSession>();
    if (!session->active()) {
      r.note = "CUPTI unavailable: " + session->error();
      session.reset();
    }
  } else {
    r.note = "CUDA events requested";
  }

  if (session) {
    r.timer = "cupti_activity";
    std::vector<std::pair<uint64_t, uint64_t>> windows;
    for (int i = 0; i < protocol.iterations; ++i) {
      prepare_iteration();
      uint64_t begin = session->now();
      call();
      device::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      windows.emplace_back(begin, session->now());
    }
    std::vector<Span> spans = session->collect();
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    for (size_t i = 0; i < windows.size(); ++i) {
      auto [begin, end] = windows[i];
      auto lo =
          std::lower_bound(spans.begin(), spans.end(), begin, [](const Span& s, uint64_t t) { return s.start < t; });
      uint64_t first = UINT64_MAX, last = 0;
      for (auto it = lo; it != spans.end() && it->start <= end; ++it) {
        first = std::min(first, it->start);
        last = std::max(last, it->end);
      }
      if (first == UINT64_MAX)
        throw RunFailure(RunStatus::runtime_error,
                         "timed iteration " + std::to_string(i) + " recorded no GPU activity (CUPTI)");
      r.ns.push_back(double(last - first));
    }
    return r;
  }

  r.timer = "cuda_events";
  Events ev;
  for (int i = 0; i < protocol.iterations; ++i) {
    prepare_iteration();
    device::check(cudaEventRecord(ev.start, cudaStream_t(stream)), "cudaEventRecord");
    call();
    device::check(cudaEventRecord(ev.stop, cudaStream_t(stream)), "cudaEventRecord");
    device::check(cudaEventSynchronize(ev.stop), "cudaEventSynchronize");
    float ms = 0;
    device::check(cudaEventElapsedTime(&ms, ev.start, ev.stop), "cudaEventElapsedTime");
    r.ns.push_back(double(ms) * 1e6);
  }
  return r;
}

#else  // no CUDA

bool cupti_available(std::string* why_not) {
  if (why_not) *why_not = "kindex was built without CUDA";
  return false;
}
std::string cupti_version() { return ""; }
TimingSamples time_device(const TimingProtocol&, const std::function<void()>&, const std::function<void()>&, void*,
                          bool) {
  throw RunFailure(RunStatus::runtime_error, "device timing: kindex was built without CUDA");
}

#endif

}  // namespace kindex::measure
