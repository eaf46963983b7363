/* A host-pointer implementation of kindex's C ABI (kindex_paged_decode) for the runner's fault tests, built at
 * test time into one shared library per KX_MODE:
 *   0 correct (naive fp64 decode), 1 crashes (null write), 2 returns an error, 3 wrong (every output + 0.5),
 *   4 hangs (never returns), 5 records the params it is called with (the sizes and the version-2 fields, one line
 *   appended to the file $KX_PARAMS_FILE) and returns an error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kindex/kindex.h"

#ifndef KX_MODE
#define KX_MODE 0
#endif

static const char* g_error = "";
KINDEX_API const char* kindex_last_error(void) { return g_error; }
KINDEX_API int kindex_abi_host_pointers(void) { return 1; }
#define KX_STR2(x) #x
#define KX_STR(x) KX_STR2(x)
KINDEX_API const char* kindex_version(void) { return "fake-decode-" KX_STR(KX_MODE); }

static float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

KINDEX_API kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params* p, size_t* bytes) {
  (void)p;
  *bytes = 0;
  return KINDEX_STATUS_OK;
}

KINDEX_API kindex_status kindex_paged_decode(const kindex_paged_decode_params* p, void* workspace,
                                             size_t workspace_bytes, void* stream) {
  (void)workspace, (void)workspace_bytes, (void)stream;
  if (KX_MODE == 1) *(volatile int*)0 = 1;
  if (KX_MODE == 2) {
    g_error = "fake_decode: head_dim = 128: synthetic failure for the runner's tests";
    return KINDEX_STATUS_INVALID_ARGUMENT;
  }
  if (KX_MODE == 4)
    for (;;) sleep(1);
  if (KX_MODE == 5) {
    const char* path = getenv("KX_PARAMS_FILE");
    FILE* f = path ? fopen(path, "a") : NULL;
    if (f) {
      fprintf(f,
              "batch_size=%d num_kv_heads=%d page_size=%d kv_format=%d kv_layout=%d k_scale=%g v_scale=%g "
              "q_len_per_req=%d window_left=%d logits_soft_cap=%g sinks=%d pos_encoding=%d rope_scale=%g "
              "rope_theta=%g\n",
              p->batch_size, p->num_kv_heads, p->page_size, (int)p->kv_format, (int)p->kv_layout, p->k_scale,
              p->v_scale, p->q_len_per_req, p->window_left, p->logits_soft_cap, p->sinks != NULL,
              (int)p->pos_encoding, p->rope_scale, p->rope_theta);
      fclose(f);
    }
    g_error = "fake_decode: params recorded";
    return KINDEX_STATUS_INVALID_ARGUMENT;
  }
  const uint16_t* q = (const uint16_t*)p->q;
  const uint16_t* k = (const uint16_t*)p->k_cache;
  const uint16_t* v = (const uint16_t*)p->v_cache;
  uint16_t* out = (uint16_t*)p->output;
  const int group = p->num_qo_heads / p->num_kv_heads, d_max = p->head_dim;
  for (int b = 0; b < p->batch_size; ++b) {
    const int begin = p->kv_indptr[b], pages = p->kv_indptr[b + 1] - begin;
    const int last = pages == 0 ? 0 : (p->kv_last_page_len ? p->kv_last_page_len[b] : p->page_size);
    const long tokens = pages == 0 ? 0 : (long)(pages - 1) * p->page_size + last;
    for (int h = 0; h < p->num_qo_heads; ++h) {
      const uint16_t* qh = q + ((long)b * p->num_qo_heads + h) * d_max;
      double m = -INFINITY, sum = 0, acc[256] = {0};
      for (int pass = 0; pass < 2; ++pass) {
        for (long t = 0; t < tokens; ++t) {
          long page = p->kv_indices[begin + t / p->page_size];
          long row = ((page * p->page_size + t % p->page_size) * p->num_kv_heads + h / group) * d_max;
          double s = 0;
          for (int d = 0; d < d_max; ++d) s += (double)bf16_to_float(qh[d]) * bf16_to_float(k[row + d]);
          s *= p->sm_scale;
          if (pass == 0) {
            if (s > m) m = s;
          } else {
            double w = exp(s - m);
            sum += w;
            for (int d = 0; d < d_max; ++d) acc[d] += w * bf16_to_float(v[row + d]);
          }
        }
      }
      uint16_t* o = out + ((long)b * p->num_qo_heads + h) * d_max;
      for (int d = 0; d < d_max; ++d) {
        double x = tokens ? acc[d] / sum : 0.0;
        if (KX_MODE == 3) x += 0.5;
        o[d] = float_to_bf16((float)x);
      }
      if (p->lse) p->lse[(long)b * p->num_qo_heads + h] = tokens ? (float)((m + log(sum)) / log(2.0)) : -INFINITY;
    }
  }
  return KINDEX_STATUS_OK;
}
