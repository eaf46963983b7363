#pragma once
// One interface for everything the runner can bench: kindex's kernels (C ABI, in process), the GPU reference,
// the CPU reference, and external shared libraries exporting kindex's C ABI. The runner treats them alike:
// it puts the call's tensors where memory() says, asks for workspace, and calls run().
#include <memory>
#include <string>
#include <vector>

#include "runner/problem.hpp"
#include "runner/run_result.hpp"
#include "catalog/definition.hpp"
#include "core/tensor.hpp"

namespace kindex::runner {

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
};

// "kindex" | "gpu-reference" | "cpu-reference" | "external:PATH.so". Throws kindex::Error("--impl", spec, ...)
// for an unknown name or a library that cannot be loaded or lacks the C ABI.
std::unique_ptr<Implementation> make_implementation(const std::string& spec);
// Validates a spec without loading anything (for argument checking).
void check_implementation_spec(const std::string& spec);
const std::vector<std::string>& builtin_implementation_names();

}  // namespace kindex::runner
