/* kindex C ABI: the kernels of libkindex.so.
 *
 * Every function returns a kindex_status; on failure kindex_last_error() returns a message for the calling
 * thread that names the offending field and value. All pointers are device pointers unless a field says
 * otherwise; tensors are dense row-major (C-contiguous). Calls enqueue work on the given CUDA stream and
 * never copy from device to host, so they can be captured in a CUDA graph.
 *
 * Params structs can grow: each begins with `struct_size`, which the caller sets to sizeof the struct it was
 * compiled with (the *_PARAMS_INIT macros do, and give every other field its default). Every entry point checks
 * it before reading anything else: a struct_size that is not one of the sizes this library knows (this header's,
 * and those of the earlier versions listed with each struct) is refused with KINDEX_STATUS_INVALID_ARGUMENT
 * naming params.struct_size, never read past its end. The fields an earlier version's caller does not have are
 * taken as their defaults (given with each field). */
#ifndef KINDEX_KINDEX_H
#define KINDEX_KINDEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KINDEX_API __declspec(dllexport)
#else
#define KINDEX_API __attribute__((visibility("default")))
#endif

typedef enum kindex_status {
  KINDEX_STATUS_OK = 0,
  KINDEX_STATUS_INVALID_ARGUMENT = 1, /* a field is out of range; see kindex_last_error() */
  KINDEX_STATUS_NOT_SUPPORTED = 2,    /* a configuration this build cannot run (or no CUDA in this build) */
  KINDEX_STATUS_WORKSPACE_TOO_SMALL = 3,
  KINDEX_STATUS_CUDA_ERROR = 4,       /* a CUDA runtime error; the message carries cudaGetErrorString */
  KINDEX_STATUS_INVALID_INPUT = 5     /* validation mode found a bad index array entry on the device */
} kindex_status;

typedef enum kindex_dtype {
  KINDEX_DTYPE_BF16 = 0,
  KINDEX_DTYPE_FP16 = 1,
  KINDEX_DTYPE_FP32 = 2,
  KINDEX_DTYPE_INT32 = 3
} kindex_dtype;

/* The message of the calling thread's last failed call ("" if none). Valid until the thread's next call. */
KINDEX_API const char* kindex_last_error(void);
KINDEX_API const char* kindex_status_name(kindex_status status);
/* "0.1.0+cuda" or "0.1.0+nocuda". */
KINDEX_API const char* kindex_version(void);

/* ---------------------------------------------------------------------------------------------------------
 * Batched GQA decode over a paged KV cache (FlashInfer-Bench gqa_paged_decode_*).
 *   q          [batch_size, num_qo_heads, head_dim]            dtype
 *   k_cache    [num_pages, page_size, num_kv_heads, head_dim]  dtype (NHD)
 *   v_cache    [num_pages, page_size, num_kv_heads, head_dim]  dtype
 *   kv_indptr  [batch_size + 1] int32, kv_indptr[0] == 0, non-decreasing, kv_indptr[batch_size] == num_kv_indices
 *   kv_indices [num_kv_indices] int32 page ids in [0, num_pages), any order, may repeat
 *   kv_last_page_len [batch_size] int32 in [1, page_size], or NULL: every last page is full
 *   output     [batch_size, num_qo_heads, head_dim]            dtype
 *   lse        [batch_size, num_qo_heads] fp32, base-2 log-sum-exp of sm_scale * q.k (NULL: not written)
 * Query head h reads KV head h / (num_qo_heads / num_kv_heads). An empty sequence gives zeros and -inf.
 *
 * Since struct version 2 (the fields after `validate`), FlashInfer's decode variants, with its semantics:
 *   kv_format   KV pages in dtype (default) or fp8 e4m3 / e5m2: k = k_scale * fp8 value, v = v_scale * fp8 value.
 *               k_scale / v_scale apply to every format (FlashInfer folds k_scale into sm_scale and multiplies the
 *               output by v_scale); finite and > 0, default 1. An fp8 cache is computed in fp16 (every fp8 value is
 *               exact in it): q of a bf16 call is rounded to fp16 and saturates at +-65504.
 *   kv_layout   NHD (default: [num_pages, page_size, num_kv_heads, head_dim]) or HND ([num_pages, num_kv_heads,
 *               page_size, head_dim]).
 *   q_len_per_req  query tokens per request, 1 (default) .. 8: q and output are [batch_size * q_len_per_req,
 *               num_qo_heads, head_dim], lse [batch_size * q_len_per_req, num_qo_heads]; request b owns rows
 *               [b * q_len_per_req, (b + 1) * q_len_per_req). Token j of a request with kv_len keys sits at position
 *               kv_len - q_len_per_req + j and sees keys 0 .. that position (causal among the new tokens).
 *   window_left  < 0 (default -1): no window; else a query at position i sees keys i - window_left .. i.
 *   logits_soft_cap  > 0: a logit s = sm_scale * q.k becomes cap * tanh(s / cap); 0 (default): off.
 *   sinks       NULL (default) or [num_qo_heads] fp32, finite: sinks[h] (natural-log units, on the scale of the
 *               logits, not soft-capped) joins the softmax of every row of head h as one more logit with a zero
 *               value row (FlashInfer's AttentionSink).
 *   pos_encoding  NONE (default) or ROPE_LLAMA: the kernel rotates q (token j of a request at kv_len - q_len_per_req
 *               + j, so the one token of plain decode at kv_len - 1) and every k (key t at t) by Llama's rotary
 *               embedding over the whole head: pair (i, i + head_dim/2) turned by the angle position * freq_i,
 *               freq_i = 1 / (rope_scale * rope_theta^(2i / head_dim)), x_i' = x_i cos - x_{i+D/2} sin,
 *               x_{i+D/2}' = x_{i+D/2} cos + x_i sin, before the dot product (the scales are linear: where they
 *               apply does not matter). rope_scale and rope_theta finite and > 0, default 1 and 1e4.
 *   lse is the base-2 log-sum-exp of the logits that enter the softmax: after soft-cap and masking, and with the
 *   sink included (FlashInfer's AttentionSink writes log2 of its denominator, sink term and all). A row that sees
 *   no key gives zeros and lse -inf, or with a sink zeros and lse sinks[h] * log2(e).
 * ------------------------------------------------------------------------------------------------------- */
typedef enum kindex_kv_format {
  KINDEX_KV_FORMAT_SAME_AS_Q = 0, /* k_cache / v_cache hold `dtype` */
  KINDEX_KV_FORMAT_FP8_E4M3 = 1,
  KINDEX_KV_FORMAT_FP8_E5M2 = 2
} kindex_kv_format;

typedef enum kindex_kv_layout { KINDEX_KV_LAYOUT_NHD = 0, KINDEX_KV_LAYOUT_HND = 1 } kindex_kv_layout;

typedef enum kindex_pos_encoding {
  KINDEX_POS_ENCODING_NONE = 0,
  KINDEX_POS_ENCODING_ROPE_LLAMA = 1
} kindex_pos_encoding;

typedef struct kindex_paged_decode_params {
  uint32_t struct_size; /* sizeof(kindex_paged_decode_params), set by the caller (KINDEX_PAGED_DECODE_PARAMS_INIT) */
  kindex_dtype dtype; /* BF16 or FP16 */
  int32_t batch_size;
  int32_t num_qo_heads;
  int32_t num_kv_heads;
  int32_t head_dim;   /* 64, 128 or 256 */
  int32_t page_size;  /* 1..128 */
  int64_t num_pages;
  int64_t num_kv_indices; /* host-known length of kv_indices (== kv_indptr[batch_size]) */
  const void* q;
  const void* k_cache;
  const void* v_cache;
  const int32_t* kv_indptr;
  const int32_t* kv_indices;
  const int32_t* kv_last_page_len;
  float sm_scale;
  void* output;
  float* lse;
  int32_t validate; /* non-zero: check indptr/indices/last_page_len on the device first (adds a sync) */
  /* ---- version 2; version 1 ends above (KINDEX_PAGED_DECODE_PARAMS_V1_SIZE) ---- */
  kindex_kv_format kv_format;       /* default SAME_AS_Q */
  kindex_kv_layout kv_layout;       /* default NHD */
  float k_scale;                    /* default 1 */
  float v_scale;                    /* default 1 */
  int32_t q_len_per_req;            /* default 1 */
  int32_t window_left;              /* default -1 */
  float logits_soft_cap;            /* default 0 */
  const float* sinks;               /* default NULL */
  kindex_pos_encoding pos_encoding; /* default NONE */
  float rope_scale;                 /* default 1 */
  float rope_theta;                 /* default 1e4 */
} kindex_paged_decode_params;

/* sizeof version 1 of the struct, still accepted: the fields up to `validate`, then padding to its 8-byte alignment. */
#define KINDEX_PAGED_DECODE_PARAMS_V1_SIZE ((uint32_t)(offsetof(kindex_paged_decode_params, validate) + 8))

/* kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;  -- struct_size and the defaults set, the rest 0 */
#ifdef __cplusplus
#define KINDEX_PAGED_DECODE_PARAMS_INIT \
  ([] {                                 \
    kindex_paged_decode_params p_{};    \
    p_.struct_size = sizeof p_;         \
    p_.k_scale = p_.v_scale = 1.0f;     \
    p_.q_len_per_req = 1;               \
    p_.window_left = -1;                \
    p_.rope_scale = 1.0f;               \
    p_.rope_theta = 1e4f;               \
    return p_;                          \
  }())
#else
#define KINDEX_PAGED_DECODE_PARAMS_INIT                                                                      \
  { .struct_size = sizeof(kindex_paged_decode_params), .k_scale = 1.0f, .v_scale = 1.0f, .q_len_per_req = 1, \
    .window_left = -1, .rope_scale = 1.0f, .rope_theta = 1e4f }
#endif

/* Bytes of device workspace the calls below need for these sizes (0 is possible). */
KINDEX_API kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params* params,
                                                            size_t* bytes);
/* Plan once per batch step, run once per layer: the plan (written into the workspace on the device, from kv_indptr
 * and kv_last_page_len alone) balances the work over the GPU for this page table; every run with the same sizes
 * (q_len_per_req and window_left included) and page table reuses it. Both only enqueue on the stream (no host sync
 * unless validate is set), so both can be captured in a CUDA graph. A run whose workspace holds no plan of the same
 * sizes writes NaN. */
KINDEX_API kindex_status kindex_paged_decode_plan(const kindex_paged_decode_params* params, void* workspace,
                                                  size_t workspace_bytes, void* stream /* cudaStream_t */);
KINDEX_API kindex_status kindex_paged_decode_run(const kindex_paged_decode_params* params, void* workspace,
                                                 size_t workspace_bytes, void* stream /* cudaStream_t */);
/* Plan and run in one call. */
KINDEX_API kindex_status kindex_paged_decode(const kindex_paged_decode_params* params, void* workspace,
                                             size_t workspace_bytes, void* stream /* cudaStream_t */);

/* ---------------------------------------------------------------------------------------------------------
 * GQA attention-layer backward with RoPE (SOL-ExecBench L2/003), bf16, destination passing.
 * hidden = 5120, 32 query heads, 8 KV heads, head_dim 128 are fixed by the definition; shapes as there.
 * ------------------------------------------------------------------------------------------------------- */
typedef struct kindex_gqa_rope_backward_params {
  uint32_t struct_size; /* sizeof(kindex_gqa_rope_backward_params) (KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT) */
  int32_t batch_size;
  int32_t seq_len;
  /* inputs (bf16) */
  const void* grad_output;    /* [B, S, 5120] */
  const void* hidden_states;  /* [B, S, 5120] */
  const void* cos;            /* [B, S, 128] */
  const void* sin;            /* [B, S, 128] */
  const void* q_weight;       /* [4096, 5120] */
  const void* k_weight;       /* [1024, 5120] */
  const void* v_weight;       /* [1024, 5120] */
  const void* o_weight;       /* [5120, 4096] */
  const void* query_states;   /* [B, 32, S, 128] */
  const void* key_states;     /* [B, 32, S, 128] */
  const void* value_states;   /* [B, 32, S, 128] */
  const void* attn_weights;   /* [B, 32, S, S] */
  const void* attn_output;    /* [B, S, 4096] */
  float scaling;
  /* outputs (bf16) */
  void* grad_hidden_states;   /* [B, S, 5120] */
  void* grad_q_weight;        /* [4096, 5120] */
  void* grad_k_weight;        /* [1024, 5120] */
  void* grad_v_weight;        /* [1024, 5120] */
  void* grad_o_weight;        /* [5120, 4096] */
} kindex_gqa_rope_backward_params;

#ifdef __cplusplus
#define KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT \
  ([] { kindex_gqa_rope_backward_params p_{}; p_.struct_size = sizeof p_; return p_; }())
#else
#define KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT { sizeof(kindex_gqa_rope_backward_params) }
#endif

KINDEX_API kindex_status kindex_gqa_rope_backward_workspace_size(const kindex_gqa_rope_backward_params* params,
                                                                 size_t* bytes);
KINDEX_API kindex_status kindex_gqa_rope_backward(const kindex_gqa_rope_backward_params* params, void* workspace,
                                                  size_t workspace_bytes, void* stream /* cudaStream_t */);

#ifdef __cplusplus
}
#endif

#endif /* KINDEX_KINDEX_H */
