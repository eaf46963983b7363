#pragma once
// Host-side bf16 / fp16 / fp8 (e4m3, e5m2) <-> float conversion: to float exactly, from float rounded to nearest
// even (as torch and the CUDA intrinsics do).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kindex {

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// Rounds a float to the nearest bf16 value, returned as float (the reference's "round after each op").
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

inline float f16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t float_to_f16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow (incl. rounding up) to inf
  if (a < 0x38800000u) {                                   // subnormal or zero in fp16
    float v = std::bit_cast<float>(a);
    // scale so the fp16 subnormal unit is 1.0, then round half to even
    float scaled = v * 16777216.0f;  // 2^24
    uint32_t m = uint32_t(std::nearbyint(scaled));
    return uint16_t(sign | m);
  }
  uint32_t exp = (a >> 23) - 112;
  uint32_t man = a & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

// fp8 e4m3 as torch.float8_e4m3fn (OCP "fn": bias 7, no infinities, S.1111.111 is NaN; max 448) to float, exactly.
inline float fp8_e4m3_to_float(uint8_t x) {
  const int exp = (x >> 3) & 0xf, man = x & 7;
  if (exp == 0xf && man == 7) return std::numeric_limits<float>::quiet_NaN();
  const float v = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(float(8 + man), exp - 10);
  return x & 0x80 ? -v : v;
}

// fp8 e5m2 (torch.float8_e5m2: bias 15, IEEE-style infinities and NaN) is the top byte of an fp16.
inline float fp8_e5m2_to_float(uint8_t x) { return f16_to_float(uint16_t(x) << 8); }

namespace detail {
// The magnitude bits (exponent << man_bits | mantissa) of a finite a >= 0 rounded to nearest even in a binary
// format with man_bits mantissa bits and exponent bias `bias` (subnormals below 2^(1 - bias)); beyond the format's
// exponent range the result is simply larger than its largest code (the caller maps it to inf or NaN).
inline unsigned fp8_magnitude(float a, int man_bits, int bias) {
  if (a == 0.0f) return 0;
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int ulp = std::max(e - 1 - man_bits, 1 - bias - man_bits);
  const double v = std::ldexp(std::nearbyint(std::ldexp(double(a), -ulp)), ulp);  // ties to even
  if (v == 0.0) return 0;
  int ev = 0;
  std::frexp(v, &ev);
  const int biased = ev - 1 + bias;
  if (biased <= 0) return unsigned(std::ldexp(v, -ulp));  // subnormal: the mantissa is v in units of the ulp
  return unsigned(biased << man_bits) | (unsigned(std::ldexp(v, man_bits - (ev - 1))) - (1u << man_bits));
}
}  // namespace detail

// float -> torch.float8_e4m3fn, nearest even; like torch's cast it does not saturate: beyond 448 (after rounding) and
// NaN give NaN (0x7f).
inline uint8_t float_to_fp8_e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  const unsigned m = std::isinf(f) ? 0xffu : detail::fp8_magnitude(std::fabs(f), 3, 7);
  return uint8_t(sign | (m > 0x7eu ? 0x7fu : m));
}

// float -> torch.float8_e5m2, nearest even; beyond 57344 (after rounding) gives inf (0x7c), NaN gives NaN (0x7f).
inline uint8_t float_to_fp8_e5m2(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  const unsigned m = std::isinf(f) ? 0xffu : detail::fp8_magnitude(std::fabs(f), 2, 15);
  return uint8_t(sign | (m > 0x7bu ? 0x7cu : m));
}

}  // namespace kindex
