#pragma once
// Counter-based random numbers: element i of stream s under seed k is a pure function of (k, s, i), so
// inputs are reproducible, identical across thread counts, and generated in parallel; the arithmetic is
// core/random_math.hpp's, which the device generator (libkindex_gpu_reference.so) shares bit for bit.
#include <cstdint>

#include "core/tensor.hpp"

namespace kindex {

uint64_t mix64(uint64_t x);                                    // splitmix64 finaliser
double uniform01(uint64_t seed, uint64_t stream, uint64_t i);  // in (0, 1)
double standard_normal(uint64_t seed, uint64_t stream, uint64_t i);  // elements 2p, 2p+1: one Box-Muller pair
// Serial: standard_normal(seed, stream, i) for i in [begin, end), as floats, into out[0, end - begin).
void normal_values(uint64_t seed, uint64_t stream, int64_t begin, int64_t end, float* out);

// Fills a host tensor (any floating dtype) with standard normal values times `scale`, rounded to its dtype.
void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, double scale = 1.0);
// Fills elements [begin, end) only, with the values fill_normal gives them (element i is always the same value).
void fill_normal_range(Tensor& t, uint64_t seed, uint64_t stream, int64_t begin, int64_t end, double scale = 1.0);
// Fills with uniform values in [lo, hi).
void fill_uniform(Tensor& t, uint64_t seed, uint64_t stream, double lo, double hi);
// A stream id derived from a name ("q", "k_cache", ...), so each input has its own stream.
uint64_t stream_id(const char* name);

}  // namespace kindex
