#pragma once
// How a measured call can fail: the status a run ends with, in KernelIndex's BenchmarkRun vocabulary, and the
// exception that carries it out of the device layer, the timer and the runner's pipeline.
#include <stdexcept>
#include <string>

namespace kindex::measure {

// How a run ended, in KernelIndex's BenchmarkRun status vocabulary.
enum class RunStatus { passed, incorrect_numerical, runtime_error, timeout, resource_exceeded };

// A failure that ends one (implementation, workload) run with a status. `sticky` marks a CUDA error that
// poisons the context (illegal address, launch failure, ...): the worker process must be replaced.
struct RunFailure : std::runtime_error {
  RunFailure(RunStatus status, const std::string& message, bool sticky = false)
      : std::runtime_error(message), status(status), sticky(sticky) {}
  RunStatus status;
  bool sticky;
};

}  // namespace kindex::measure
