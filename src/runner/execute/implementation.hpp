#pragma once
// One interface for everything the runner can bench: kindex's kernels (C ABI, in process), the GPU reference,
// the CPU reference, external shared libraries exporting kindex's C ABI, and the harnesses' solutions (and the
// built-in peers, which are solutions too) run in a Python process of their own (solution.hpp). The runner treats
// the in-process ones alike: it puts the call's tensors where memory() says, asks for workspace, and calls run();
// an out-of-process one takes each round whole (round_runner()).
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/execute/problem.hpp"
#include "runner/record/run_result.hpp"
#include "catalog/definition.hpp"
#include "catalog/inputs.hpp"
#include "core/tensor.hpp"

namespace kindex::runner {

// An implementation that runs in another process (a solution in the Python worker) gets a round's inputs as a
// recipe it rebuilds bit for bit there (host tensors by value, random tensors by the device generator's
// description and seed), calls once and hands back its outputs; time_round() then times that call there with the
// runner's own timer. Failures throw RunFailure.
class RoundRunner {
 public:
  virtual ~RoundRunner() = default;
  struct Outputs {
    std::map<std::string, Tensor> tensors;  // on the host, by output name (none when written to device_outputs)
    std::optional<double> plan_s;           // host time of the implementation's untimed plan step, if it has one
  };
  // `device_outputs` (by output name: contiguous buffers of this process's own device::Buffer allocations): the
  // outputs are written there, on the device, through CUDA IPC; null: they come back on the host.
  virtual Outputs run_round(const catalog::Definition& def, const catalog::Workload& w, const catalog::Inputs& inputs,
                            uint64_t seed, const TensorMap* device_outputs) = 0;
  virtual TimingSamples time_round(const TimingProtocol& protocol, bool fresh_addresses, bool prefer_cupti) = 0;
  // The one-time set-up of its runs of `def`, ahead of them (a peer's JIT build, torch.compile of each shape): the
  // implementation's plan step on each call's arguments, whose random tensors are shapes only (never drawn: no
  // device work). Nothing is called or timed. Failures throw RunFailure.
  struct PrepareCall {
    const catalog::Workload* workload = nullptr;
    catalog::Inputs inputs;  // the first round's, random float tensors planned (GenerateOptions::plan_random_floats)
  };
  struct Prepared {
    int planned = 0;  // calls the plan step saw (0: the implementation has none; loading it was the set-up)
    int compile_cache_hits = 0, compile_cache_misses = 0;  // torch.compile's on-disk cache, one per graph
  };
  virtual Prepared prepare(const catalog::Definition& def, const std::vector<PrepareCall>& calls) = 0;
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual const ImplementationInfo& info() const = 0;
  // Where run() expects its tensors (scalars are always host values).
  Where memory() const { return info().on_device ? Where::device : Where::host; }
  // Empty when the definition is supported, else the reason it is not.
  virtual std::string unsupported_reason(const catalog::Definition& def) const;
  virtual size_t workspace_bytes(ProblemKind kind, const CallArgs& args) const = 0;
  // Enqueues (device) or performs (host) one call. Failures throw RunFailure with their status.
  virtual void run(ProblemKind kind, const CallArgs& args, void* workspace, size_t workspace_bytes, void* stream) = 0;
  // Non-null for an implementation that takes whole rounds in another process (run() is then never called).
  virtual RoundRunner* round_runner() { return nullptr; }
};

// "kindex" | "gpu-reference" | "cpu-reference" | "external:PATH.so" | "solution:PATH.json" | a peer
// (peer_names()). Throws kindex::Error("--impl", spec, ...) for an unknown name, a library that cannot be loaded
// or lacks the C ABI, or a solution file that is not one.
std::unique_ptr<Implementation> make_implementation(const std::string& spec);
// Validates a spec without loading anything (for argument checking).
void check_implementation_spec(const std::string& spec);
const std::vector<std::string>& builtin_implementation_names();

}  // namespace kindex::runner
