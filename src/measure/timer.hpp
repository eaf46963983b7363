#pragma once
// The timing protocol of FlashInfer-Bench and SOL-ExecBench, and its clocks.
//   device: before EVERY call (untimed, warm-up and timed) `prepare` runs (SOL: copy inputs to fresh addresses)
//     and, with cold_l2, a buffer of 2 x L2 size is zeroed; the stream is then synchronised, so neither is in any
//     timed window. `untimed` calls, `warmup` calls, then `iterations` timed calls. Each timed call's time is the
//     span from the start of its first GPU activity to the end of its last (kernels, memcpys, memsets on any
//     stream), read with the CUPTI Activity API: the activities whose start lies between a CUPTI timestamp taken
//     just before the call and one taken after synchronising it. CUDA events around the call are the fallback
//     when CUPTI cannot be loaded (the result says which clock was used).
//   host (CPU implementations): a steady wall clock around each call.
#include <functional>
#include <string>
#include <vector>

namespace kindex::measure {

struct TimingProtocol {
  int untimed = 6;  // 1 + 5 calls before warm-up
  int warmup = 10;
  int iterations = 50;
  bool cold_l2 = true;  // device only
};

struct TimingSamples {
  std::vector<double> ns;  // one per timed iteration
  std::string timer;       // "cupti_activity" | "cuda_events" | "wall_clock"
  std::string note;        // why CUPTI was not used, when it was not
};

// `stream` is a cudaStream_t. prefer_cupti = false forces CUDA events.
TimingSamples time_device(const TimingProtocol& protocol, const std::function<void()>& prepare,
                          const std::function<void()>& call, void* stream, bool prefer_cupti = true);
TimingSamples time_host(const TimingProtocol& protocol, const std::function<void()>& prepare,
                        const std::function<void()>& call);

// Whether libcupti could be loaded (and why not); tries KINDEX_CUPTI_LIBRARY, libcupti.so.13, libcupti.so and
// the CUDA toolkit's lib64 folders.
bool cupti_available(std::string* why_not = nullptr);
std::string cupti_version();  // "13.0.1" style from cuptiGetVersion, "" when unavailable

}  // namespace kindex::measure
