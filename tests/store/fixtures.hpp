#pragma once
// Runs built from KernelIndex's example manifests (a complete, valid chain), varied per call so each is a new
// content-addressed run.
#include <string>

#include "evidence/digest.hpp"
#include "evidence/reader.hpp"
#include "store/store.hpp"
#include "support/paths.hpp"

namespace kindex::store::test {

inline nlohmann::json example(const std::string& name) {
  return evidence::read_manifest_file(kindex::test::data_dir() + "/kernelindex/examples/" + name);
}

// An OwnRun of the example chain with the given median latency; `salt` makes it a distinct run.
inline OwnRun example_run(int64_t median_ns, int salt, bool real_gpu = false, std::vector<double> samples = {},
                          int implementation_variant = 0) {
  OwnRun r;
  r.operation = example("operation-spec.yaml");
  r.workload = example("workload-case.yaml");
  r.implementation = example("implementation-revision.yaml");
  r.protocol = example("benchmark-protocol.yaml");
  r.environment = example("execution-environment.yaml");
  r.run = example("benchmark-run.yaml");
  r.run["spec"]["timing"]["latencyNs"] = {{"median", median_ns}};
  r.run["spec"]["timing"].erase("samples");
  r.run["spec"]["observedAt"] = "2026-08-01T12:" + std::string(salt % 60 < 10 ? "0" : "") + std::to_string(salt % 60) +
                                ":00." + std::to_string(100 + salt / 60 % 900) + "Z";
  if (implementation_variant) {
    r.implementation["spec"]["projectRevision"]["version"] = "v" + std::to_string(implementation_variant);
    r.implementation["metadata"]["name"] = "variant-" + std::to_string(implementation_variant);
    r.run["spec"]["implementationDigest"] = evidence::manifest_digest(r.implementation);
  }
  r.definition_name = "example_rmsnorm";
  r.real_gpu = real_gpu;
  r.samples_ns = std::move(samples);
  return r;
}

}  // namespace kindex::store::test
