// The CPU references' C ABI (include/kindex/cpu_reference.h), as the runner calls it: statuses and the calling
// thread's last error, which names the field and its value. Only the public header is included here.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "kindex/cpu_reference.h"

namespace {

// One sequence of 3 tokens on page 1 of 2 (page_size 4), one query head of 8 dims, bf16 zeros.
struct Decode {
  std::vector<uint16_t> q = std::vector<uint16_t>(8), out = std::vector<uint16_t>(8);
  std::vector<uint16_t> cache = std::vector<uint16_t>(2 * 4 * 8);  // K and V alike
  std::vector<int32_t> indptr{0, 1}, indices{1}, last_len{3};
  kindex_paged_decode_params params() {
    kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;
    p.dtype = KINDEX_DTYPE_BF16;
    p.batch_size = 1;
    p.num_qo_heads = p.num_kv_heads = 1;
    p.head_dim = 8;
    p.page_size = 4;
    p.num_pages = 2;
    p.num_kv_indices = 1;
    p.q = q.data();
    p.k_cache = p.v_cache = cache.data();
    p.kv_indptr = indptr.data();
    p.kv_indices = indices.data();
    p.kv_last_page_len = last_len.data();
    p.sm_scale = 0.5f;
    p.output = out.data();
    return p;
  }
};

std::string last_error() { return kindex_cpu_reference_last_error(); }

// A bad field: INVALID_ARGUMENT naming the field and value; a valid call after it clears the last error.
TEST(CpuReferenceCAbi, BadFieldIsInvalidArgumentNamingTheFieldAndValue) {
  Decode d;
  auto p = d.params();
  p.num_kv_heads = 0;
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "paged_decode: num_kv_heads = 0: must be > 0");

  p = d.params();
  p.q_len_per_req = 9;
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "paged_decode: q_len_per_req = 9: must be in [1, 8]");

  kindex_gqa_rope_backward_params b = KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT;
  b.batch_size = -1;
  EXPECT_EQ(kindex_cpu_reference_gqa_rope_backward(&b), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "gqa_rope_backward: batch_size = -1: must be >= 0");
  b.batch_size = 1;
  b.seq_len = 1;
  EXPECT_EQ(kindex_cpu_reference_gqa_rope_backward(&b), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "gqa_rope_backward: grad_output = NULL: is required");

  auto ok = d.params();  // a valid call after the errors: OK, and the last error cleared
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&ok), KINDEX_STATUS_OK) << last_error();
  EXPECT_EQ(last_error(), "");
}

TEST(CpuReferenceCAbi, BadIndexEntryIsInvalidInput) {
  Decode d;
  d.indices[0] = 500;
  auto p = d.params();
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_INVALID_INPUT);
  EXPECT_EQ(last_error(), "paged_decode: kv_indices[0] = 500: page id out of range [0, 2)");
  d.indices[0] = 1;
  d.last_len[0] = 5;
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_INVALID_INPUT);
  EXPECT_EQ(last_error(), "paged_decode: kv_last_page_len[0] = 5: must be in [1, page_size = 4]");
  d.last_len[0] = 3;
  d.indptr[0] = 1;
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_INVALID_INPUT);
  EXPECT_EQ(last_error(), "paged_decode: kv_indptr[0] = 1: must be 0");
}

TEST(CpuReferenceCAbi, StructSizeIsCheckedFirstAndVersionOneIsAccepted) {
  EXPECT_EQ(kindex_cpu_reference_paged_decode(nullptr), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "paged_decode: params = NULL: required");
  EXPECT_EQ(kindex_cpu_reference_gqa_rope_backward(nullptr), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "gqa_rope_backward: params = NULL: required");

  Decode d;
  auto p = d.params();
  p.struct_size = 12;
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(last_error().rfind("paged_decode: params.struct_size = 12: ", 0), 0u) << last_error();

  // Version 1's struct: the fields past it are garbage here and must be taken as their defaults.
  p = d.params();
  p.struct_size = KINDEX_PAGED_DECODE_PARAMS_V1_SIZE;
  p.q_len_per_req = 99;
  p.k_scale = -1;
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_OK) << last_error();

  kindex_gqa_rope_backward_params b = KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT;
  b.struct_size = sizeof b + 8;
  EXPECT_EQ(kindex_cpu_reference_gqa_rope_backward(&b), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("params.struct_size"), std::string::npos) << last_error();
}

TEST(CpuReferenceCAbi, LastErrorIsPerThread) {
  Decode d;
  auto p = d.params();
  p.head_dim = -3;
  ASSERT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_INVALID_ARGUMENT);
  std::string other;
  std::thread([&] {
    auto q = d.params();
    q.page_size = 0;
    kindex_cpu_reference_paged_decode(&q);
    other = kindex_cpu_reference_last_error();
  }).join();
  EXPECT_EQ(other, "paged_decode: page_size = 0: must be > 0");
  EXPECT_EQ(last_error(), "paged_decode: head_dim = -3: must be > 0");
}

}  // namespace
