// The C ABI's params structs carry their size: every entry point of libkindex.so (loaded as a user would, with
// dlopen) refuses a struct_size it does not know, naming the field, before reading anything past it. Runs on
// any build (the check comes before CUDA is touched).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kindex/kindex.h"
#include "support/paths.hpp"

namespace {

class StructSize : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen((kindex::test::binary_dir() + "/lib/libkindex.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, lib_) << dlerror();
    last_error_ = reinterpret_cast<const char* (*)()>(dlsym(lib_, "kindex_last_error"));
    ASSERT_NE(nullptr, last_error_);
    // Two pages, the second inaccessible: a struct placed to end at the boundary faults if read past its end.
    page_ = size_t(sysconf(_SC_PAGESIZE));
    mem_ = static_cast<char*>(mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(MAP_FAILED, static_cast<void*>(mem_));
    ASSERT_EQ(0, mprotect(mem_ + page_, page_, PROT_NONE));
  }
  void TearDown() override {
    if (mem_) munmap(mem_, 2 * page_);
    if (lib_) dlclose(lib_);
  }
  template <class F>
  F symbol(const char* name) {
    return reinterpret_cast<F>(dlsym(lib_, name));
  }
  // A zeroed struct of `bytes` bytes ending at the guard page, with struct_size = bytes.
  void* older_struct(uint32_t bytes) {
    char* p = mem_ + page_ - bytes;
    std::memset(p, 0, bytes);
    std::memcpy(p, &bytes, sizeof bytes);
    return p;
  }
  std::string last_error() const { return last_error_(); }

  void* lib_ = nullptr;
  const char* (*last_error_)() = nullptr;
  char* mem_ = nullptr;
  size_t page_ = 0;
};

using DecodeSize = kindex_status (*)(const kindex_paged_decode_params*, size_t*);
using Decode = kindex_status (*)(const kindex_paged_decode_params*, void*, size_t, void*);
using BackwardSize = kindex_status (*)(const kindex_gqa_rope_backward_params*, size_t*);
using Backward = kindex_status (*)(const kindex_gqa_rope_backward_params*, void*, size_t, void*);

TEST_F(StructSize, OlderSmallerDecodeParamsAreRefusedNamingTheField) {
  auto size = symbol<DecodeSize>("kindex_paged_decode_workspace_size");
  auto decode = symbol<Decode>("kindex_paged_decode");
  ASSERT_TRUE(size && decode);
  for (uint32_t bytes : {uint32_t(4), uint32_t(KINDEX_PAGED_DECODE_PARAMS_V1_SIZE - 8),
                         uint32_t(sizeof(kindex_paged_decode_params) - 8)}) {
    auto* p = static_cast<const kindex_paged_decode_params*>(older_struct(bytes));
    size_t ws = 123;
    EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(p, &ws)) << bytes;
    EXPECT_NE(std::string::npos, last_error().find("params.struct_size = " + std::to_string(bytes))) << last_error();
    EXPECT_NE(std::string::npos, last_error().find(std::to_string(sizeof(kindex_paged_decode_params)) + " (or version 1's 128) bytes"))
        << last_error();
    EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, decode(p, nullptr, 0, nullptr)) << bytes;
    EXPECT_NE(std::string::npos, last_error().find("kindex_paged_decode: params.struct_size")) << last_error();
  }
}

// Version 1 of the decode params (kindex.h: KINDEX_PAGED_DECODE_PARAMS_V1_SIZE) is still taken, with the version-2
// fields at their defaults and nothing read past its end; a version-2 field out of range is refused by name.
TEST_F(StructSize, VersionOneDecodeParamsAreTakenWithTheNewFieldsAtTheirDefaults) {
  auto size = symbol<DecodeSize>("kindex_paged_decode_workspace_size");
  auto version = symbol<const char* (*)()>("kindex_version");
  ASSERT_TRUE(size && version);
  const bool cuda = std::string(version()).find("+cuda") != std::string::npos;
  ASSERT_EQ(128u, KINDEX_PAGED_DECODE_PARAMS_V1_SIZE);  // x86-64 and aarch64: what version 1's sizeof was
  kindex_paged_decode_params full = KINDEX_PAGED_DECODE_PARAMS_INIT;
  full.dtype = KINDEX_DTYPE_BF16;
  full.batch_size = 0;  // sizes only: no device memory is touched
  full.num_qo_heads = 8;
  full.num_kv_heads = 1;
  full.head_dim = 128;
  full.page_size = 16;
  full.sm_scale = 0.125f;
  auto* v1 = static_cast<kindex_paged_decode_params*>(older_struct(KINDEX_PAGED_DECODE_PARAMS_V1_SIZE));
  std::memcpy(static_cast<void*>(v1), &full, KINDEX_PAGED_DECODE_PARAMS_V1_SIZE);
  v1->struct_size = KINDEX_PAGED_DECODE_PARAMS_V1_SIZE;
  size_t ws = 7;
  const kindex_status s = size(v1, &ws);
  EXPECT_EQ(std::string::npos, last_error().find("struct_size")) << last_error();
  if (cuda) {
    EXPECT_EQ(KINDEX_STATUS_OK, s) << last_error();
    EXPECT_EQ(0u, ws);
  } else {
    EXPECT_EQ(KINDEX_STATUS_NOT_SUPPORTED, s) << last_error();
  }
  if (!cuda) GTEST_SKIP() << "the version-2 field checks run in the CUDA build";
  kindex_paged_decode_params bad = full;
  bad.k_scale = 0;
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(&bad, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params.k_scale = 0")) << last_error();
  bad = full;
  bad.q_len_per_req = 9;
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(&bad, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params.q_len_per_req = 9")) << last_error();
  bad = full;
  bad.kv_layout = static_cast<kindex_kv_layout>(7);
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(&bad, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params.kv_layout = 7")) << last_error();
  // Every other version-2 field out of range, by name.
  struct Bad {
    const char* message;
    void (*apply)(kindex_paged_decode_params&);
  };
  const Bad bads[] = {
      {"params.kv_format = 3", [](kindex_paged_decode_params& p) { p.kv_format = static_cast<kindex_kv_format>(3); }},
      {"params.v_scale = nan", [](kindex_paged_decode_params& p) { p.v_scale = NAN; }},
      {"params.k_scale = inf", [](kindex_paged_decode_params& p) { p.k_scale = INFINITY; }},
      {"params.q_len_per_req = 0", [](kindex_paged_decode_params& p) { p.q_len_per_req = 0; }},
      {"params.logits_soft_cap = -1", [](kindex_paged_decode_params& p) { p.logits_soft_cap = -1; }},
      {"params.pos_encoding = 2",
       [](kindex_paged_decode_params& p) { p.pos_encoding = static_cast<kindex_pos_encoding>(2); }},
      {"params.rope_scale = 0", [](kindex_paged_decode_params& p) { p.rope_scale = 0; }},
      {"params.rope_theta = -1", [](kindex_paged_decode_params& p) { p.rope_theta = -1; }},
      {"params.rope_scale = inf", [](kindex_paged_decode_params& p) { p.rope_scale = INFINITY; }},
      {"params.rope_theta = nan", [](kindex_paged_decode_params& p) { p.rope_theta = NAN; }},
      {"params.num_kv_heads = 40000",  // a page of 128 x 40000 x 256 bf16 elements: 2.6 GB
       [](kindex_paged_decode_params& p) {
         p.num_kv_heads = p.num_qo_heads = 40000;
         p.page_size = 128;
         p.head_dim = 256;
       }},
  };
  for (const Bad& b : bads) {
    bad = full;
    b.apply(bad);
    EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(&bad, &ws)) << b.message;
    EXPECT_NE(std::string::npos, last_error().find(b.message)) << last_error();
  }
  // The variants the kernels do not run yet are NOT_SUPPORTED, by name; those they run (RoPE included) are taken.
  bad = full;
  bad.q_len_per_req = 3;  // group 8 x 3 tokens: more rows than one 16-row tile
  EXPECT_EQ(KINDEX_STATUS_NOT_SUPPORTED, size(&bad, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params.q_len_per_req = 3 with group size 8")) << last_error();
  kindex_paged_decode_params good = full;
  good.pos_encoding = KINDEX_POS_ENCODING_ROPE_LLAMA;
  EXPECT_EQ(KINDEX_STATUS_OK, size(&good, &ws)) << last_error();
  good.rope_scale = 8;
  good.rope_theta = 5e5f;
  good.q_len_per_req = 2;
  good.kv_layout = KINDEX_KV_LAYOUT_HND;
  good.k_scale = 0.5f;
  good.v_scale = 2;
  good.logits_soft_cap = 30;
  good.window_left = 128;
  EXPECT_EQ(KINDEX_STATUS_OK, size(&good, &ws)) << last_error();
  good.kv_format = KINDEX_KV_FORMAT_FP8_E5M2;
  EXPECT_EQ(KINDEX_STATUS_OK, size(&good, &ws)) << last_error();
}

TEST_F(StructSize, OlderSmallerBackwardParamsAreRefusedNamingTheField) {
  auto size = symbol<BackwardSize>("kindex_gqa_rope_backward_workspace_size");
  auto backward = symbol<Backward>("kindex_gqa_rope_backward");
  ASSERT_TRUE(size && backward);
  const uint32_t bytes = sizeof(kindex_gqa_rope_backward_params) - 8;
  auto* p = static_cast<const kindex_gqa_rope_backward_params*>(older_struct(bytes));
  size_t ws = 0;
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(p, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params.struct_size = " + std::to_string(bytes))) << last_error();
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, backward(p, nullptr, 0, nullptr));
  EXPECT_NE(std::string::npos, last_error().find("kindex_gqa_rope_backward: params.struct_size")) << last_error();
}

TEST_F(StructSize, UnsetOrNewerSizesAreRefusedAndTheInitMacroIsAccepted) {
  auto size = symbol<DecodeSize>("kindex_paged_decode_workspace_size");
  kindex_paged_decode_params zeroed;
  std::memset(&zeroed, 0, sizeof zeroed);  // a caller that forgot struct_size
  size_t ws = 0;
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(&zeroed, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params.struct_size = 0")) << last_error();
  struct Newer {
    kindex_paged_decode_params base;
    int64_t added;
  } newer{};
  newer.base.struct_size = sizeof newer;  // built against a later header
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(&newer.base, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params.struct_size = " + std::to_string(sizeof newer)));
  // The right size passes the check: what follows is the ordinary validation (or "built without CUDA").
  kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;
  EXPECT_EQ(sizeof p, p.struct_size);
  size(&p, &ws);
  EXPECT_EQ(std::string::npos, last_error().find("struct_size")) << last_error();
  EXPECT_EQ(KINDEX_STATUS_INVALID_ARGUMENT, size(nullptr, &ws));
  EXPECT_NE(std::string::npos, last_error().find("params = NULL")) << last_error();
}

// The GPU reference behind the same ABI computes the plain decode only: a version-1 struct is taken, a version-2
// variant is refused naming its field (never answered as the plain decode). Only sizes are asked: no GPU needed.
TEST_F(StructSize, TheGpuReferenceRefusesDecodeVariantsByName) {
  void* ref = dlopen((kindex::test::binary_dir() + "/lib/libkindex_gpu_reference.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!ref) GTEST_SKIP() << "no GPU reference in this build: " << dlerror();
  auto size = reinterpret_cast<DecodeSize>(dlsym(ref, "kindex_paged_decode_workspace_size"));
  auto ref_error = reinterpret_cast<const char* (*)()>(dlsym(ref, "kindex_last_error"));
  ASSERT_TRUE(size && ref_error);
  kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;
  size_t ws = 7;
  EXPECT_EQ(KINDEX_STATUS_OK, size(&p, &ws)) << ref_error();
  auto* v1 = static_cast<kindex_paged_decode_params*>(older_struct(KINDEX_PAGED_DECODE_PARAMS_V1_SIZE));
  EXPECT_EQ(KINDEX_STATUS_OK, size(v1, &ws)) << ref_error();
  p.window_left = 3;
  EXPECT_EQ(KINDEX_STATUS_NOT_SUPPORTED, size(&p, &ws));
  EXPECT_NE(std::string::npos, std::string(ref_error()).find("params.window_left")) << ref_error();
  p = KINDEX_PAGED_DECODE_PARAMS_INIT;
  p.kv_format = KINDEX_KV_FORMAT_FP8_E4M3;
  EXPECT_EQ(KINDEX_STATUS_NOT_SUPPORTED, size(&p, &ws));
  EXPECT_NE(std::string::npos, std::string(ref_error()).find("params.kv_format")) << ref_error();
  dlclose(ref);
}

}  // namespace
