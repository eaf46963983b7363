#pragma once
// Host-side bf16 / fp16 <-> float conversion, round to nearest even (as torch and the CUDA intrinsics do), and
// fp8 (e4m3, e5m2) -> float, exact.
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

}  // namespace kindex
