#include "catalog/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "core/random.hpp"
#include "helpers.hpp"

namespace kindex::catalog {
namespace {

std::string with_header(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);  // little-endian host
  return out + header + data;
}

TEST(Safetensors, RoundTripEveryDtype) {
  std::map<std::string, Tensor> tensors;
  for (DType d : {DType::bf16, DType::f16, DType::f32, DType::f64, DType::i32, DType::i64, DType::u8, DType::boolean}) {
    Tensor t(d, {3, 5});
    if (is_floating(d))
      fill_normal(t, 1, stream_id(std::string(dtype_name(d)).c_str()));
    else
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, double(i % 2));
    tensors[std::string(dtype_name(d))] = t;
  }
  tensors["empty"] = Tensor(DType::f32, {0, 4});
  tensors["scalar"] = Tensor(DType::i32, {});
  tensors["scalar"].set(0, 17);
  test::TempDir dir;
  auto path = dir.path() / "x.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}});
  std::string bytes = test::read_file(path);
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ((8 + header_len) % 8, 0u);  // header padded to alignment
  SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const Tensor& u = f.tensors.at(name);
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_EQ(u.shape(), t.shape()) << name;
    EXPECT_EQ(std::memcmp(u.data(), t.data(), t.nbytes()), 0) << name;
  }
  EXPECT_EQ(f.tensors.at("scalar").get(0), 17);
}

TEST(Safetensors, CorruptFilesAreRejected) {
  const std::string data(16, '\x01');
  struct Case {
    const char* what;
    std::string bytes;
    std::string field;
  };
  std::string huge(8, '\xff');
  std::vector<Case> cases = {
      {"too short", "abc", "header length"},
      {"header longer than file", huge, "header length"},
      {"header not JSON", with_header("{\"a\": ", data), "header"},
      {"number out of range", with_header(R"({"a":{"dtype":"U8","shape":[1e999],"data_offsets":[0,1]}})", data), "header"},
      {"header not an object", with_header("[1]", data), "header"},
      {"unknown dtype", with_header(R"({"a":{"dtype":"F12","shape":[4],"data_offsets":[0,16]}})", data), "a.dtype"},
      {"shape vs bytes", with_header(R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", data),
       "a.data_offsets"},
      {"offsets past the end", with_header(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", data),
       "a.data_offsets"},
      {"offsets reversed", with_header(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})", data),
       "a.data_offsets"},
      {"negative dim", with_header(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", data), "a.shape"},
      {"overflowing shape",
       with_header(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", data), "a.shape"},
      {"overlap",
       with_header(
           R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
           data),
       "data_offsets"},
      {"missing offsets", with_header(R"({"a":{"dtype":"F32","shape":[4]}})", data), "a.data_offsets"},
      {"metadata not strings", with_header(R"({"__metadata__":{"k":1}})", data), "__metadata__.k"},
      {"entry not an object", with_header(R"({"a":3})", data), "a"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_KINDEX_ERROR(parse_safetensors(c.bytes, "blob.safetensors"), "blob.safetensors", c.field, "");
  }
  EXPECT_KINDEX_ERROR(read_safetensors("/nonexistent/x.safetensors"), "/nonexistent/x.safetensors", "", "");
}

}  // namespace
}  // namespace kindex::catalog
