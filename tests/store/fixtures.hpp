#pragma once
// Runs built from KernelIndex's example manifests (a complete, valid chain), varied per call so each is a new
// content-addressed run.
#include <string>

#include "evidence/digest.hpp"
#include "evidence/reader.hpp"
#include "store/rows.hpp"
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

// A run of the example chain that names `original` (a runDigest) as the run it re-measured (the labels
// `kindex rerun` writes), in the environment `product` names; `gpu`: measured on a GPU with raw samples (what kindex's
// runner marks reproduced). Its implementation is another one ("variant-1", kindex's own, as a rerun mapped to a
// peer is), so its runs' evidence stays its own.
inline OwnRun rerun_of(const std::string& original, int salt, const std::string& product, bool gpu,
                       const std::string& status = "passed") {
  OwnRun r = example_run(9100 + salt, salt, gpu, {9100, 9110, 9120}, 1);
  r.environment["spec"]["hardware"]["product"] = product;
  r.run["spec"]["environmentDigest"] = evidence::manifest_digest(r.environment);
  r.run["spec"]["status"] = status;
  r.run["metadata"]["labels"] = {{kReproducesRunLabel, original}};
  return r;
}

}  // namespace kindex::store::test
