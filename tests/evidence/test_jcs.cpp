// JCS (RFC 8785) and SHA-256: the RFC's own vectors, an independently generated table of ECMAScript number
// strings, and random round trips.
#include <gtest/gtest.h>

#include <bit>
#include <charconv>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/jcs.hpp"
#include "evidence/reader.hpp"
#include "support/paths.hpp"

using namespace kindex::evidence;
using nlohmann::json;

namespace {
double from_bits(uint64_t bits) { return std::bit_cast<double>(bits); }
}  // namespace

TEST(Jcs, Rfc8785NumberVectors) {
  const std::pair<uint64_t, const char*> vectors[] = {
      {0x0000000000000000, "0"},
      {0x8000000000000000, "0"},
      {0x0000000000000001, "5e-324"},
      {0x8000000000000001, "-5e-324"},
      {0x7fefffffffffffff, "1.7976931348623157e+308"},
      {0xffefffffffffffff, "-1.7976931348623157e+308"},
      {0x4340000000000000, "9007199254740992"},
      {0xc340000000000000, "-9007199254740992"},
      {0x4430000000000000, "295147905179352830000"},
      {0x44b52d02c7e14af5, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6, "1e+23"},
      {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4e, "999999999999999700000"},
      {0x444b1ae4d6e2ef4f, "999999999999999900000"},
      {0x444b1ae4d6e2ef50, "1e+21"},
      {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8d, "0.000001"},
      {0x41b3de4355555553, "333333333.3333332"},
      {0x41b3de4355555554, "333333333.33333325"},
      {0x41b3de4355555555, "333333333.3333333"},
      {0x41b3de4355555556, "333333333.3333334"},
      {0x41b3de4355555557, "333333333.33333343"},
      {0xbecbf647612f3696, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959, "1424953923781206.2"},
  };
  for (const auto& [bits, expected] : vectors) EXPECT_EQ(ecmascript_number(from_bits(bits)), expected) << std::hex << bits;
  EXPECT_THROW(ecmascript_number(from_bits(0x7fffffffffffffff)), kindex::Error);  // NaN
  EXPECT_THROW(ecmascript_number(from_bits(0x7ff0000000000000)), kindex::Error);  // Infinity
  EXPECT_THROW(canonical_json(json(std::numeric_limits<double>::quiet_NaN())), kindex::Error);
}

TEST(Jcs, Rfc8785CanonicalizationExample) {
  const json input = parse_json_strict(R"({
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  })", "rfc8785");
  EXPECT_EQ(canonical_json(input),
            "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],"
            "\"string\":\"\xE2\x82\xAC$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
}

TEST(Jcs, KeysSortByUtf16CodeUnits) {
  // RFC 8785 section 3.2.3: U+1F600 (surrogates D83D DE00) sorts before U+FB33 although its code point is larger.
  const json input = parse_json_strict(R"({"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\ud83d\ude00": 5,
                                           "\u0080": 6, "\u00f6": 7})", "rfc8785 sort");
  EXPECT_EQ(canonical_json(input),
            "{\"\\r\":2,\"1\":4,\"\xC2\x80\":6,\"\xC3\xB6\":7,\"\xE2\x82\xAC\":1,\"\xF0\x9F\x98\x80\":5,\"\xEF\xAC\xB3\":3}");
  EXPECT_TRUE(utf16_less("\xF0\x9F\x98\x80", "\xEF\xAC\xB3"));
  EXPECT_TRUE(utf16_less("ab", "abc"));
  EXPECT_FALSE(utf16_less("abc", "abc"));
}

TEST(Jcs, StringsEscapeLikeJsonStringify) {
  EXPECT_EQ(ecmascript_quote(std::string("a\x01\x1f\x7f\b\f\n\r\t\"\\/")), "\"a\\u0001\\u001f\x7f\\b\\f\\n\\r\\t\\\"\\\\/\"");
  EXPECT_EQ(ecmascript_quote("\xC2\xB5s"), "\"\xC2\xB5s\"");  // non-ASCII stays literal UTF-8
  EXPECT_THROW(ecmascript_quote("\xC0\xAF"), kindex::Error);        // overlong
  EXPECT_THROW(ecmascript_quote("\xED\xA0\x80"), kindex::Error);    // encoded surrogate
  EXPECT_THROW(ecmascript_quote("abc\xF0\x9F"), kindex::Error);     // truncated
  EXPECT_THROW(canonical_json(json::object({{"k\xFF", 1}})), kindex::Error);
}

TEST(Jcs, IntegersPrintAsTheirDouble) {
  EXPECT_EQ(canonical_json(json(int64_t{9007199254740992})), "9007199254740992");
  EXPECT_EQ(canonical_json(json(int64_t{9007199254740993})), "9007199254740992");  // nearest double, as JS parses it
  EXPECT_EQ(canonical_json(json(uint64_t{18446744073709551615u})), "18446744073709552000");
  EXPECT_EQ(canonical_json(json(int64_t{-1234567890123456789})), "-1234567890123456800");
  EXPECT_EQ(canonical_json(json(int64_t{-42})), "-42");
  EXPECT_EQ(canonical_json(json(1e21)), "1e+21");
  EXPECT_EQ(canonical_json(json(100.0)), "100");
  EXPECT_EQ(canonical_json(json({{"b", json::array({1, 2.5, "x"})}, {"a", nullptr}})), R"({"a":null,"b":[1,2.5,"x"]})");
}

TEST(Jcs, MatchesIndependentlyGeneratedNumberTable) {
  std::ifstream in(kindex::test::source_dir() + "/tests/evidence/data/ecmascript_numbers.txt");
  ASSERT_TRUE(in) << "fixture missing";
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string hex, expected;
    fields >> hex >> expected;
    uint64_t bits = 0;
    std::from_chars(hex.data(), hex.data() + hex.size(), bits, 16);
    EXPECT_EQ(ecmascript_number(from_bits(bits)), expected) << hex;
    ++checked;
  }
  EXPECT_GT(checked, 2000);
}

TEST(Jcs, RandomDoublesRoundTripInShortestForm) {
  std::mt19937_64 rng(20260801);
  for (int i = 0; i < 5000; ++i) {
    const double x = from_bits(rng());
    if (!std::isfinite(x)) continue;
    const std::string s = ecmascript_number(x);
    double back = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), back);
    ASSERT_EQ(r.ec, std::errc()) << s;
    ASSERT_EQ(r.ptr, s.data() + s.size()) << s;
    EXPECT_EQ(back, x == 0 ? 0.0 : x) << s;
    // ECMAScript layout: exponent form exactly when |x| < 1e-6 or |x| >= 1e21, always with a sign.
    const bool exponent_form = s.find('e') != std::string::npos;
    EXPECT_EQ(exponent_form, x != 0 && (std::fabs(x) < 1e-6 || std::fabs(x) >= 1e21)) << s;
    if (exponent_form) {
      EXPECT_TRUE(s.find("e+") != std::string::npos || s.find("e-") != std::string::npos) << s;
    }
  }
}

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(is_sha256_digest(sha256_digest(json::object())));
  EXPECT_FALSE(is_sha256_digest("md5:abc123"));
}
