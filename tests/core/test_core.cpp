#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/random_math.hpp"
#include "core/tensor.hpp"

using namespace kindex;

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(Half, Fp16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t x = uint16_t(h);
    float f = f16_to_float(x);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16(f), x) << std::hex << h;
  }
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f16_to_float(float_to_f16(1e-7f)), f16_to_float(2));  // subnormal rounding
}

// float -> fp8 as torch's casts: every finite code round-trips, a value half-way between two codes goes to the one
// with the even mantissa, subnormals round in their fixed step, and past the largest value e4m3fn gives NaN (it has
// no infinity) and e5m2 inf.
TEST(Half, Fp8RoundsToNearestEvenLikeTorch) {
  for (unsigned c = 0; c < 256; ++c) {
    const uint8_t x = uint8_t(c);
    if (!std::isnan(fp8_e4m3_to_float(x))) ASSERT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(x)), x) << std::hex << c;
    if (std::isfinite(fp8_e5m2_to_float(x))) ASSERT_EQ(float_to_fp8_e5m2(fp8_e5m2_to_float(x)), x) << std::hex << c;
  }
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);  // half-way between 1 (even) and 1.125
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);  // half-way between 1.125 and 1.25 (even)
  EXPECT_EQ(float_to_fp8_e4m3(1.07f), 0x39);
  EXPECT_EQ(float_to_fp8_e4m3(-1.07f), 0xb9);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.5f, -9)), 0x02);  // subnormal half-way 1.5 units -> 2 (even)
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -11)), 0x00);  // a quarter unit
  EXPECT_EQ(float_to_fp8_e4m3(0.015625f - std::ldexp(1.0f, -12)), 0x08);  // rounds up into the first normal
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7e);  // half-way to 480: to 448 (even)
  EXPECT_EQ(float_to_fp8_e4m3(470.0f), 0x7f);  // NaN
  EXPECT_EQ(float_to_fp8_e4m3(1e6f), 0x7f);
  EXPECT_EQ(float_to_fp8_e5m2(1.125f), 0x3c);  // half-way between 1 (even) and 1.25
  EXPECT_EQ(float_to_fp8_e5m2(1.375f), 0x3e);  // half-way between 1.25 and 1.5 (even)
  EXPECT_EQ(float_to_fp8_e5m2(61440.0f), 0x7c);  // half-way to 65536: inf
  EXPECT_EQ(float_to_fp8_e5m2(-1e6f), 0xfc);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -17)), 0x00);  // half a unit: to 0 (even)
}

TEST(DType, ParsesBothSpellings) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("int32"), DType::i32);
  EXPECT_FALSE(parse_dtype("bfloat17").has_value());
  EXPECT_EQ(parse_safetensors_dtype("I32"), DType::i32);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::f8e4m3);
  EXPECT_EQ(parse_dtype("float8_e5m2"), DType::f8e5m2);
  EXPECT_EQ(dtype_name(DType::f8e4m3), "float8_e4m3fn");
  EXPECT_EQ(parse_safetensors_dtype("F8_E5M2"), DType::f8e5m2);
  EXPECT_EQ(dtype_size(DType::f8e4m3), 1u);
  EXPECT_TRUE(is_floating(DType::f8e5m2));
}

TEST(Tensor, ViewsAndConversions) {
  Tensor t(DType::bf16, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.view().strides, (std::vector<int64_t>{3, 1}));
  t.set(4, 1.5);
  EXPECT_EQ(t.get(4), 1.5);
  EXPECT_EQ(t.get(0), 0.0);
  EXPECT_THROW(Tensor(DType::f32, {-1}), std::invalid_argument);
  Tensor f8(DType::f8e4m3, {2});
  f8.set(1, -1.07);
  EXPECT_EQ(f8.get(1), -1.125);
}

TEST(Parallel, CoversEveryIndexOnceAndRethrows) {
  std::vector<std::atomic<int>> hits(10007);
  parallel_for(10007, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_THROW(parallel_for(100, [](int64_t, int64_t) { throw std::runtime_error("x"); }), std::runtime_error);
}

TEST(Random, ReproducibleAndNormal) {
  Tensor a(DType::f32, {100000}), b(DType::f32, {100000});
  fill_normal(a, 7, stream_id("q"));
  fill_normal(b, 7, stream_id("q"));
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_EQ(a.get(i), b.get(i));
    sum += a.get(i);
    sq += a.get(i) * a.get(i);
  }
  double mean = sum / a.numel(), var = sq / a.numel() - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.02);
  fill_normal(b, 8, stream_id("q"));
  EXPECT_NE(a.get(0), b.get(0));
}

TEST(Random, RangesAndSingleValuesAgreeWithTheFullFill) {
  Tensor full(DType::f32, {1001}), part(DType::f32, {1001});
  fill_normal(full, 3, stream_id("k"));
  fill_normal_range(part, 3, stream_id("k"), 7, 500);  // starts on the odd half of a pair
  std::vector<float> values(500 - 7);
  normal_values(3, stream_id("k"), 7, 500, values.data());
  for (int64_t i = 0; i < 1001; ++i) {
    ASSERT_EQ(float(standard_normal(3, stream_id("k"), uint64_t(i))), full.get(i)) << i;
    if (i >= 7 && i < 500) {
      ASSERT_EQ(part.get(i), full.get(i)) << i;
      ASSERT_EQ(values[size_t(i - 7)], full.get(i)) << i;
    } else {
      ASSERT_EQ(part.get(i), 0.0) << i;
    }
  }
  // The two halves of a pair are not the same draw.
  EXPECT_NE(full.get(0), full.get(1));
}

// The generator's own log, sincos and exp (core/random_math.hpp: exactly rounded operations only, so the device
// gives the same bits) are the functions they stand for, to a few units in the last place of a double.
TEST(Random, TransformIsLogSinCosAndExpToRoundingError) {
  namespace rm = random_math;
  double worst_log = 0, worst_trig = 0, worst_exp = 0;
  for (uint64_t i = 0; i < 200000; ++i) {
    const double u = rm::unit(rm::draw(rm::stream_key(11, 5), i));
    worst_log = std::max(worst_log, std::abs(rm::log_unit(u) - std::log(u)) / std::max(1e-300, std::abs(std::log(u))));
    double s, c;
    rm::sincos_two_pi(u, s, c);
    const double angle = 2 * M_PI * u;
    worst_trig = std::max({worst_trig, std::abs(s - std::sin(angle)), std::abs(c - std::cos(angle))});
    const double x = -40.0 * u;
    worst_exp = std::max(worst_exp, std::abs(rm::exp_nonpositive(x) - std::exp(x)) / std::exp(x));
  }
  EXPECT_LT(worst_log, 1e-15);
  EXPECT_LT(worst_trig, 4e-15);  // includes libm's own rounding of 2 pi u
  EXPECT_LT(worst_exp, 1e-15);
  EXPECT_EQ(rm::log_unit(1.0), 0.0);
  EXPECT_EQ(rm::exp_nonpositive(0.0), 1.0);
  EXPECT_EQ(rm::exp_nonpositive(-800.0), 0.0);
  double s, c;
  rm::sincos_two_pi(0.25, s, c);
  EXPECT_EQ(s, 1.0);
  EXPECT_EQ(c, 0.0);
  // The angle tables SOL-ExecBench's rule asks for: cos and sin of a clamped float angle.
  EXPECT_NEAR(rm::trig_of_angle(rm::clamped_angle(10.0), true), std::cos(double(float(M_PI))), 1e-15);  // clamped
  EXPECT_NEAR(rm::trig_of_angle(1.0f, false), std::sin(1.0), 1e-15);
}

TEST(Error, NamesWhereFieldAndValue) {
  Error e("defs/x.json", "axes.page_size.value", "-3", "must be positive");
  EXPECT_STREQ(e.what(), "defs/x.json: axes.page_size.value = -3: must be positive");
}
