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

static uint64_t draw(uint64_t seed, uint64_t stream, uint64_t i) {
  return mix64(mix64(mix64(seed) ^ stream) ^ i);
}

double uniform01(uint64_t seed, uint64_t stream, uint64_t i) {
  return (double(draw(seed, stream, i) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double standard_normal(uint64_t seed, uint64_t stream, uint64_t i) {
  // Box-Muller on two independent draws of element i.
  double u1 = uniform01(seed, stream, 2 * i), u2 = uniform01(seed, stream, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, double scale) {
  TensorView v = t.view();
  parallel_for(t.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) v.set(i, scale * standard_normal(seed, stream, uint64_t(i)));
  }, 1 << 16);
}

void fill_uniform(Tensor& t, uint64_t seed, uint64_t stream, double lo, double hi) {
  TensorView v = t.view();
  parallel_for(t.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) v.set(i, lo + (hi - lo) * uniform01(seed, stream, uint64_t(i)));
  }, 1 << 16);
}

uint64_t stream_id(const char* name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = name; *p; ++p) h = (h ^ uint8_t(*p)) * 1099511628211ull;
  return h;
}

}  // namespace kindex
