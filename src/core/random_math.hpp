#pragma once
// The arithmetic of kindex's input generator, written once for the host (core/random.cpp, catalog/inputs.cpp) and
// the device (gpu_reference/random_fill.cu). Every value is a pure function of (seed, stream, index) built only from
// integer operations and IEEE-754 double adds, multiplies, divides and square roots, each rounded once, in a fixed
// order: no libm call (log, sincos, exp differ between glibc and CUDA) and no fused multiply-add (the host files are
// built with -ffp-contract=off; on the device every operation is an explicit __dadd_rn / __dmul_rn). So the host
// and the device give the same bits (tests/gpu/test_random_fill.cpp checks it), whatever the compiler.
#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define KX_RANDOM_FN __host__ __device__ inline
#else
#define KX_RANDOM_FN inline
#endif

namespace kindex::random_math {

#if defined(__CUDA_ARCH__)
KX_RANDOM_FN double add(double a, double b) { return __dadd_rn(a, b); }
KX_RANDOM_FN double sub(double a, double b) { return __dsub_rn(a, b); }
KX_RANDOM_FN double mul(double a, double b) { return __dmul_rn(a, b); }
KX_RANDOM_FN double div(double a, double b) { return __ddiv_rn(a, b); }
KX_RANDOM_FN double sqrt_rn(double a) { return __dsqrt_rn(a); }
KX_RANDOM_FN double nearest(double a) { return rint(a); }  // ties to even
KX_RANDOM_FN uint64_t bits(double a) { return uint64_t(__double_as_longlong(a)); }
KX_RANDOM_FN double from_bits(uint64_t b) { return __longlong_as_double((long long)b); }
#else
KX_RANDOM_FN double add(double a, double b) { return a + b; }
KX_RANDOM_FN double sub(double a, double b) { return a - b; }
KX_RANDOM_FN double mul(double a, double b) { return a * b; }
KX_RANDOM_FN double div(double a, double b) { return a / b; }
KX_RANDOM_FN double sqrt_rn(double a) { return std::sqrt(a); }
KX_RANDOM_FN double nearest(double a) { return std::nearbyint(a); }  // ties to even (default rounding mode)
KX_RANDOM_FN uint64_t bits(double a) {
  uint64_t b;
  std::memcpy(&b, &a, sizeof b);
  return b;
}
KX_RANDOM_FN double from_bits(uint64_t b) {
  double a;
  std::memcpy(&a, &b, sizeof a);
  return a;
}
#endif

// splitmix64's finaliser.
KX_RANDOM_FN uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// The key of (seed, stream), so one draw costs one mix64.
KX_RANDOM_FN uint64_t stream_key(uint64_t seed, uint64_t stream) { return mix64(mix64(seed) ^ stream); }
KX_RANDOM_FN uint64_t draw(uint64_t key, uint64_t i) { return mix64(key ^ i); }
// 53 random bits to a double in (0, 1): exact (an integer below 2^53, plus 1/2, times 2^-53).
KX_RANDOM_FN double unit(uint64_t r) { return mul(add(double(r >> 11), 0.5), 0x1p-53); }

// ln(u) for u in (0, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m - 1) / (m + 1),
// |s| < 0.172, by its series to s^23 (truncation < 1e-19 relative).
KX_RANDOM_FN double log_unit(double u) {
  const uint64_t b = bits(u);
  int e = int((b >> 52) & 0x7ff) - 1023;
  double m = from_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 0x1.6a09e667f3bcdp+0) m = mul(m, 0.5), e += 1;                     // exact
  const double s = div(sub(m, 1.0), add(m, 1.0));                             // m - 1 exact (Sterbenz)
  const double z = mul(s, s);
  const double c[12] = {0x1.0000000000000p+0, 0x1.5555555555555p-2, 0x1.999999999999ap-3, 0x1.2492492492492p-3,
                        0x1.c71c71c71c71cp-4, 0x1.745d1745d1746p-4, 0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4,
                        0x1.e1e1e1e1e1e1ep-5, 0x1.af286bca1af28p-5, 0x1.8618618618618p-5, 0x1.642c8590b2164p-5};
  double p = c[11];
  for (int k = 10; k >= 0; --k) p = add(mul(p, z), c[k]);  // sum s^2k / (2k + 1)
  const double log_m = mul(add(s, s), p);
  const double de = double(e);
  return add(mul(de, 0x1.62e42fee00000p-1), add(log_m, mul(de, 0x1.a39ef35793c76p-33)));  // + e ln 2 (hi + lo)
}

// sin and cos of (pi / 2) r for r in [-1/2, 1/2], by their Taylor series to degree 19 (truncation < 1e-17).
KX_RANDOM_FN void sincos_half_pi(double r, double& s, double& c) {
  const double z = mul(r, r);
  const double sc[10] = {0x1.921fb54442d18p+0,  -0x1.4abbce625be53p-1, 0x1.466bc6775aae2p-4, -0x1.32d2cce62bd86p-8,
                         0x1.50783487ee782p-13, -0x1.e3074fde8871fp-19, 0x1.e8f434d018d63p-25, -0x1.6fadb9f155744p-31,
                         0x1.aaec32af93359p-38, -0x1.8a404211f9547p-45};
  const double cc[10] = {0x1.0000000000000p+0,  -0x1.3bd3cc9be45dep+0, 0x1.03c1f081b5ac4p-2, -0x1.55d3c7e3cbffap-6,
                         0x1.e1f506891babbp-11, -0x1.a6d1f2a204a8cp-16, 0x1.f9d38a3763cc3p-22, -0x1.b6e24f44b128fp-28,
                         0x1.20c62c2f2d7f5p-34, -0x1.2a0c591af8314p-41};
  double ps = sc[9], pc = cc[9];
  for (int k = 8; k >= 0; --k) {
    ps = add(mul(ps, z), sc[k]);
    pc = add(mul(pc, z), cc[k]);
  }
  s = mul(r, ps);
  c = pc;
}

// sin and cos of 2 pi t, for |t| <= 1: 4t = q + r (exact), q an integer, |r| <= 1/2; the quadrant q picks the
// signs and which of sin / cos of (pi / 2) r each is.
KX_RANDOM_FN void sincos_two_pi(double t, double& s, double& c) {
  const double x = mul(t, 4.0);
  const double q = nearest(x);
  double sr, cr;
  sincos_half_pi(sub(x, q), sr, cr);
  switch (int(q) & 3) {
    case 0: s = sr, c = cr; break;
    case 1: s = cr, c = -sr; break;
    case 2: s = -sr, c = -cr; break;
    default: s = -cr, c = sr; break;
  }
}

// Box-Muller on the pair (2p, 2p + 1) of draws: elements 2p and 2p + 1 are r cos and r sin of one angle.
KX_RANDOM_FN void normal_pair(uint64_t key, uint64_t pair, double& even, double& odd) {
  const double u1 = unit(draw(key, 2 * pair)), u2 = unit(draw(key, 2 * pair + 1));
  const double r = sqrt_rn(mul(-2.0, log_unit(u1)));
  double s, c;
  sincos_two_pi(u2, s, c);
  even = mul(r, c);
  odd = mul(r, s);
}

KX_RANDOM_FN double normal(uint64_t key, uint64_t i) {
  double even, odd;
  normal_pair(key, i / 2, even, odd);
  return (i & 1) ? odd : even;
}

// cos or sin of a float angle in [-pi, pi] (SOL-ExecBench's RoPE tables), through t = angle / (2 pi).
KX_RANDOM_FN double trig_of_angle(float angle, bool cosine) {
  double s, c;
  sincos_two_pi(mul(double(angle), 0x1.45f306dc9c883p-3), s, c);
  return cosine ? c : s;
}

// The clamp SOL-ExecBench applies to its RoPE angles: a standard normal as float, into [-pi, pi] (float pi).
KX_RANDOM_FN float clamped_angle(double normal_value) {
  const float a = float(normal_value), pi = 0x1.921fb6p+1f;
  return a < -pi ? -pi : (a > pi ? pi : a);
}

// e^x for x <= 0 (softmax terms): x = n ln 2 + r, |r| <= ln 2 / 2, e^r by its Taylor series to r^13
// (truncation < 1e-17), times 2^n built from bits; 0 below e^-745.
KX_RANDOM_FN double exp_nonpositive(double x) {
  if (x < -745.0) return 0.0;
  const double n = nearest(mul(x, 0x1.71547652b82fep+0));
  const double r = sub(sub(x, mul(n, 0x1.62e42fee00000p-1)), mul(n, 0x1.a39ef35793c76p-33));
  const double c[14] = {0x1.0000000000000p+0, 0x1.0000000000000p+0, 0x1.0000000000000p-1, 0x1.5555555555555p-3,
                        0x1.5555555555555p-5, 0x1.1111111111111p-7, 0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13,
                        0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
                        0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33};
  double p = c[13];
  for (int k = 12; k >= 0; --k) p = add(mul(p, r), c[k]);
  int e = int(n);
  double scaled = p;
  if (e < -1022) scaled = mul(scaled, 0x1p-64), e += 64;  // two exact steps for the subnormal range
  return mul(scaled, from_bits(uint64_t(e + 1023) << 52));
}

}  // namespace kindex::random_math
