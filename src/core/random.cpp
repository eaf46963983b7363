#include "core/random.hpp"

#include <cmath>
#include <numbers>

#include "core/parallel.hpp"

namespace kindex {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace {

// The key of (seed, stream), so one draw costs one mix64.
uint64_t stream_key(uint64_t seed, uint64_t stream) { return mix64(mix64(seed) ^ stream); }
uint64_t draw(uint64_t key, uint64_t i) { return mix64(key ^ i); }
double unit(uint64_t bits) { return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

// Box-Muller on the pair (2p, 2p + 1) of draws: elements 2p and 2p + 1 are its cosine and sine halves, so one
// log, one sqrt and one sincos serve two elements.
void normal_pair(uint64_t key, uint64_t pair, double& even, double& odd) {
  const double u1 = unit(draw(key, 2 * pair)), u2 = unit(draw(key, 2 * pair + 1));
  const double r = std::sqrt(-2.0 * std::log(u1));
  double s = 0, c = 0;
  ::sincos(2.0 * std::numbers::pi * u2, &s, &c);
  even = r * c;
  odd = r * s;
}

}  // namespace

double uniform01(uint64_t seed, uint64_t stream, uint64_t i) { return unit(draw(stream_key(seed, stream), i)); }

double standard_normal(uint64_t seed, uint64_t stream, uint64_t i) {
  double even = 0, odd = 0;
  normal_pair(stream_key(seed, stream), i / 2, even, odd);
  return i % 2 ? odd : even;
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
  for_each_normal(key, begin, end, [&](int64_t i, double x) { v.set(i, scale * x); });
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
    for (int64_t i = b; i < e; ++i) v.set(i, lo + (hi - lo) * unit(draw(key, uint64_t(i))));
  }, 1 << 16);
}

uint64_t stream_id(const char* name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = name; *p; ++p) h = (h ^ uint8_t(*p)) * 1099511628211ull;
  return h;
}

}  // namespace kindex
