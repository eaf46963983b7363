#pragma once
// The GPU benchmarks' check of a CUDA runtime call: a failure prints the call, where, and the error, and exits 1
// (a benchmark has no caller to hand the error to).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(expr)                                                                               \
  do {                                                                                                 \
    cudaError_t err_ = (expr);                                                                         \
    if (err_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_));    \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)
