/* The README's C ABI example as a program: one batched paged decode through libkindex.so.
 * Exits 77 (skipped) without a CUDA device, non-zero on any failure. */
#include <cuda_runtime.h>
#include <kindex/kindex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_CUDA(call)                                                          \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

static unsigned short to_bf16(float f) {
  unsigned int u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

int main(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  enum { B = 2, HQ = 24, HKV = 4, D = 128, PS = 64, PAGES = 16 };
  const int indptr[B + 1] = {0, 3, 5};            /* sequence 0: 3 pages, sequence 1: 2 pages */
  const int indices[5] = {7, 2, 11, 2, 9};        /* page 2 is shared */
  const int last_page_len[B] = {17, 64};
  size_t q_elems = (size_t)B * HQ * D, cache_elems = (size_t)PAGES * PS * HKV * D;

  unsigned short* host = malloc(cache_elems * sizeof *host);
  srand(1);
  for (size_t i = 0; i < cache_elems; ++i) host[i] = to_bf16((float)rand() / RAND_MAX - 0.5f);

  void *q, *k, *v, *out, *ws = NULL;
  int *d_indptr, *d_indices, *d_last;
  float* lse;
  CHECK_CUDA(cudaMalloc(&q, q_elems * 2));
  CHECK_CUDA(cudaMalloc(&k, cache_elems * 2));
  CHECK_CUDA(cudaMalloc(&v, cache_elems * 2));
  CHECK_CUDA(cudaMalloc(&out, q_elems * 2));
  CHECK_CUDA(cudaMalloc((void**)&lse, (size_t)B * HQ * sizeof(float)));
  CHECK_CUDA(cudaMalloc((void**)&d_indptr, sizeof indptr));
  CHECK_CUDA(cudaMalloc((void**)&d_indices, sizeof indices));
  CHECK_CUDA(cudaMalloc((void**)&d_last, sizeof last_page_len));
  CHECK_CUDA(cudaMemcpy(q, host, q_elems * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(k, host, cache_elems * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(v, host, cache_elems * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_indptr, indptr, sizeof indptr, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_indices, indices, sizeof indices, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_last, last_page_len, sizeof last_page_len, cudaMemcpyHostToDevice));

  kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;
  p.dtype = KINDEX_DTYPE_BF16;
  p.batch_size = B; p.num_qo_heads = HQ; p.num_kv_heads = HKV; p.head_dim = D; p.page_size = PS;
  p.num_pages = PAGES; p.num_kv_indices = 5;
  p.q = q; p.k_cache = k; p.v_cache = v;
  p.kv_indptr = d_indptr; p.kv_indices = d_indices; p.kv_last_page_len = d_last;
  p.sm_scale = 0.08838834764831845f;
  p.output = out; p.lse = lse;

  /* Size the workspace with validation on: it then also covers calls with validation off. */
  size_t bytes = 0;
  p.validate = 1;
  if (kindex_paged_decode_workspace_size(&p, &bytes) != KINDEX_STATUS_OK) {
    fprintf(stderr, "workspace_size: %s\n", kindex_last_error());
    return 1;
  }
  p.validate = 0;
  if (bytes) CHECK_CUDA(cudaMalloc(&ws, bytes));
  if (kindex_paged_decode(&p, ws, bytes, NULL) != KINDEX_STATUS_OK) {
    fprintf(stderr, "kindex_paged_decode: %s\n", kindex_last_error());
    return 1;
  }
  float h_lse[B * HQ];
  CHECK_CUDA(cudaMemcpy(h_lse, lse, sizeof h_lse, cudaMemcpyDeviceToHost));
  for (int i = 0; i < B * HQ; ++i)
    if (!isfinite(h_lse[i])) {
      fprintf(stderr, "lse[%d] = %f is not finite\n", i, h_lse[i]);
      return 1;
    }
  /* A bad page id is refused with a message naming it when validation is on. */
  const int bad = PAGES + 5;
  CHECK_CUDA(cudaMemcpy(d_indices + 4, &bad, sizeof bad, cudaMemcpyHostToDevice));
  p.validate = 1;
  kindex_status s = kindex_paged_decode(&p, ws, bytes, NULL);
  printf("decode ok (lse[0] = %.4f, workspace %zu bytes); with a bad page id: %s: %s\n", h_lse[0], bytes,
         kindex_status_name(s), kindex_last_error());
  free(host);
  return s == KINDEX_STATUS_INVALID_INPUT ? 0 : 1;
}
