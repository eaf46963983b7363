#pragma once
// --gpus (BenchOptions::gpus): which GPUs a bench is spread over. Apart from the runner so the fuzz target
// (fuzz/fuzz_runner_gpus.cpp) compiles it alone.
#include <string>
#include <vector>

namespace kindex::runner {

// "all" (every one of `available` GPUs) or a comma list of ordinals ("0,2"), checked against `available` (the GPUs
// this process sees: session.hpp's probe_gpu_count). Throws kindex::Error naming --gpus and the value for a GPU that
// does not exist, one named twice, or anything else.
std::vector<int> gpu_ordinals(const std::string& spec, int available);

}  // namespace kindex::runner
