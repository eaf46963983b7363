#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "kindex/kindex.h"

namespace kindex::capi {

// A failure that is not a bad argument (those throw kindex::Error): its C ABI status and message.
class Failure : public std::runtime_error {
 public:
  Failure(kindex_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  kindex_status status() const { return status_; }

 private:
  kindex_status status_;
};

// Records `message` as the calling thread's last error and returns `status`.
kindex_status fail(kindex_status status, const std::string& message);
void clear_error();

// The struct_size rule of kindex.h alone, for any C ABI over its structs (libkindex.so, the GPU reference's, the CPU
// reference's): "" when `params` is non-NULL and its leading struct_size is a size this kindex.h knows (sizeof the
// struct, or an earlier version's size, `older_size`, when it has one), else the message naming the field. Reads
// nothing past struct_size.
inline std::string params_problem(const char* where, const void* params, size_t known_size, const char* type_name,
                                  size_t older_size = 0) {
  if (!params) return format_error(where, "params", "NULL", "required");
  uint32_t size = 0;
  std::memcpy(&size, params, sizeof size);
  if (size == known_size || (older_size && size == older_size)) return "";
  const std::string sizes =
      std::to_string(known_size) + (older_size ? " (or version 1's " + std::to_string(older_size) + ")" : "");
  return format_error(where, "params.struct_size", std::to_string(size),
                      std::string("this library takes ") + type_name + " of " + sizes +
                          " bytes: set struct_size = sizeof(" + type_name +
                          ") and build against this library's kindex.h");
}
// ... for each params struct of kindex.h, with the sizes it knows (the decode params: also version 1's).
inline std::string params_problem(const char* where, const kindex_paged_decode_params* params) {
  return params_problem(where, params, sizeof *params, "kindex_paged_decode_params",
                        KINDEX_PAGED_DECODE_PARAMS_V1_SIZE);
}
inline std::string params_problem(const char* where, const kindex_gqa_rope_backward_params* params) {
  return params_problem(where, params, sizeof *params, "kindex_gqa_rope_backward_params");
}

// An entry point's first check: params_problem, recorded as the last error (INVALID_ARGUMENT) when there is one.
kindex_status check_params(const char* where, const void* params, size_t known_size, const char* type_name,
                           size_t older_size = 0);

// A checked params struct as this library's version: the caller's struct_size bytes over `defaults` (kindex.h's
// *_PARAMS_INIT), so an earlier version's caller gets the defaults of the fields it does not have.
template <class Params>
Params upgraded(const Params* params, Params defaults) {
  std::memcpy(&defaults, params, std::min<size_t>(params->struct_size, sizeof(Params)));
  defaults.struct_size = sizeof(Params);
  return defaults;
}

// check_params for each params struct of kindex.h, and the decode params of any known version as this header's.
template <class Params>
kindex_status check_params(const char* where, const Params* params) {
  const std::string problem = params_problem(where, params);
  return problem.empty() ? KINDEX_STATUS_OK : fail(KINDEX_STATUS_INVALID_ARGUMENT, problem);
}
inline kindex_paged_decode_params upgraded(const kindex_paged_decode_params* params) {
  return upgraded(params, KINDEX_PAGED_DECODE_PARAMS_INIT);
}

// Runs an entry point's body and turns what it throws into the C ABI's status and last error: a Failure its own
// status, kindex::Error (a bad argument, the message names the field and value) INVALID_ARGUMENT, anything else
// CUDA_ERROR with `where` in front. OK clears the last error.
template <class F>
kindex_status guarded(const char* where, F&& body) {
  try {
    body();
    clear_error();
    return KINDEX_STATUS_OK;
  } catch (const Failure& e) {
    return fail(e.status(), e.what());
  } catch (const Error& e) {
    return fail(KINDEX_STATUS_INVALID_ARGUMENT, e.what());
  } catch (const std::exception& e) {
    return fail(KINDEX_STATUS_CUDA_ERROR, std::string(where) + ": " + e.what());
  }
}
}  // namespace kindex::capi
