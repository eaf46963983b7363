#pragma once
// Input generation: seeded, reproducible, following each source's rules.
//  FlashInfer-Bench: float tensors standard normal in their dtype (q, k_cache, v_cache bf16); the decode
//    family's index tensors (kv_indptr, kv_indices, kv_last_page_len) from the page-table generator, seeded by
//    the workload (uuid and axes) so a workload's page table is the same in every trial, as a captured blob is;
//    scalars from the workload; safetensors inputs read from disk.
//  SOL-ExecBench: activations randn; weights (*_weight) randn / sqrt(fan_in), fan_in = shape[1]; cos and sin
//    the cos / sin of ONE tensor of randn angles clamped to [-pi, pi]; attn_weights softmax over the last axis
//    of randn fp32 rows, cast to bf16; scalars from the workload.
// Every tensor draws from its own counter-based stream (stream_id(name)), so values do not depend on the
// thread count or on which other inputs exist.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "catalog/definition.hpp"
#include "catalog/page_table.hpp"
#include "core/tensor.hpp"

namespace kindex::catalog {

// How one random floating-point tensor is drawn: every element a pure function of (seed, index), so the host
// (fill_random) and the device (libkindex_gpu_reference.so's kindex_gpu_reference_fill_random) give the same bits.
struct RandomFill {
  enum class Kind { normal, cos_of_angle, sin_of_angle, softmax_rows };
  Kind kind = Kind::normal;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t stream = 0;  // stream_id of the tensor's name ("rope_angle" for cos and sin)
  double scale = 1.0;   // normal: times this
  int64_t row = 0;      // softmax_rows: the row length (last axis)
  // normal over a paged KV cache: only pages some sequence references are drawn (page_elems elements each);
  // the others are zeros. Empty: every element.
  std::vector<uint8_t> pages_used;
  int64_t page_elems = 0;
};

struct Inputs {
  std::map<std::string, kindex::Tensor> tensors;  // by input name; dense host tensors in the declared dtype
  std::map<std::string, double> scalars;          // scalar inputs (sm_scale, scaling)
  // With GenerateOptions::plan_random_floats: how each random float tensor is drawn (not in `tensors`).
  std::map<std::string, RandomFill> random;
};

// Fills `t` (dtype and shape as `fill` says) on the host.
void fill_random(kindex::Tensor& t, const RandomFill& fill, uint64_t seed);

// SOL-ExecBench's harness seeds its generator with 200; FlashInfer-Bench trials just need distinct seeds.
constexpr uint64_t kSolDefaultSeed = 200;
constexpr uint64_t kFibDefaultSeed = 1;
uint64_t default_seed(const Definition& def);

struct GenerateOptions {
  // Produce only what is not drawn at random as floating point data (index tensors, safetensors inputs,
  // scalars): enough to check a workload's constraints without allocating the caches.
  bool skip_random_floats = false;
  // Describe the random floating point tensors in Inputs::random instead of drawing them (for a generator on the
  // device); everything else as usual.
  bool plan_random_floats = false;
};

// Builds every input of the workload. Throws kindex::Error for a safetensors input that is missing or does not
// match the definition (dtype, shape), or a random integer input with no generator.
Inputs generate_inputs(const Definition& def, const Workload& workload, uint64_t seed,
                       const GenerateOptions& options = {});

// The page-table seed generate_inputs uses for a workload (a hash of its uuid and axes).
uint64_t page_table_seed(const Workload& workload);
// The page-table length distribution generate_inputs uses for a workload: its kv_indptr's "lengths", else the
// default (exponential). Throws kindex::Error for a name the generator does not know.
LengthDistribution page_table_lengths(const Workload& workload);

}  // namespace kindex::catalog
