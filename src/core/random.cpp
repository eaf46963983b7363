#include "core/random.hpp"

#include <algorithm>

#include "core/parallel.hpp"
#include "core/random_math.hpp"

namespace kindex {

uint64_t mix64(uint64_t x) { return random_math::mix64(x); }

namespace {

using random_math::draw;
using random_math::normal_pair;
using random_math::stream_key;
using random_math::unit;

}  // namespace

double uniform01(uint64_t seed, uint64_t stream, uint64_t i) { return unit(draw(stream_key(seed, stream), i)); }

double standard_normal(uint64_t seed, uint64_t stream, uint64_t i) {
  return random_math::normal(stream_key(seed, stream), i);
}

namespace {

// Serial: emit(i, standard normal i) for i in [begin, end), each Box-Muller pair computed once.
template <class Emit>
void for_each_normal(uint64_t key, int64_t begin, int64_t end, Emit&& emit) {
  for (int64_t i = begin; i < end;) {
    double even = 0, odd = 0;
    normal_pair(key, uint64_t(i) / 2, even, odd);
    if (i % 2 == 0) {
      emit(i++, even);
      if (i < end) emit(i++, odd);
    } else {
      emit(i++, odd);
    }
  }
}

void fill_range(TensorView v, uint64_t key, int64_t begin, int64_t end, double scale) {
  for_each_normal(key, begin, end, [&](int64_t i, double x) { v.set(i, random_math::mul(scale, x)); });
}

}  // namespace

void normal_values(uint64_t seed, uint64_t stream, int64_t begin, int64_t end, float* out) {
  for_each_normal(stream_key(seed, stream), begin, end, [&](int64_t i, double x) { out[i - begin] = float(x); });
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, double scale) {
  TensorView v = t.view();
  const uint64_t key = stream_key(seed, stream);
  // Chunks of an even size start on even elements, so no pair is computed twice.
  constexpr int64_t kChunk = 1 << 15;
  parallel_for((t.numel() + kChunk - 1) / kChunk, [&](int64_t b, int64_t e) {
    fill_range(v, key, b * kChunk, std::min(t.numel(), e * kChunk), scale);
  }, 1);
}

void fill_normal_range(Tensor& t, uint64_t seed, uint64_t stream, int64_t begin, int64_t end, double scale) {
  fill_range(t.view(), stream_key(seed, stream), begin, end, scale);
}

void fill_uniform(Tensor& t, uint64_t seed, uint64_t stream, double lo, double hi) {
  TensorView v = t.view();
  const uint64_t key = stream_key(seed, stream);
  parallel_for(t.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) v.set(i, lo + (hi - lo) * unit(draw(key, uint64_t(i))));  // host only
  }, 1 << 16);
}

uint64_t stream_id(const char* name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = name; *p; ++p) h = (h ^ uint8_t(*p)) * 1099511628211ull;
  return h;
}

}  // namespace kindex
