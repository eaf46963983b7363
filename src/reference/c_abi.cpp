// The CPU references' C ABI (include/kindex/cpu_reference.h): the struct_size check, then reference::paged_decode /
// gqa_rope_backward, with what they throw turned into a status and the calling thread's last error.
#include "kindex/cpu_reference.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "core/error.hpp"
#include "reference/reference.hpp"

namespace kindex::reference {
namespace {

thread_local std::string last_error;

kindex_status fail(kindex_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

// kindex.h's rule: struct_size is one of the sizes this header knows (`older_size`: an earlier version's, 0 for
// none), read before anything else; an earlier version's struct is taken over `defaults` (its *_PARAMS_INIT).
template <class Params>
kindex_status checked(const char* where, const Params* params, const char* type_name, uint32_t older_size,
                      Params defaults, Params& out) {
  if (!params) return fail(KINDEX_STATUS_INVALID_ARGUMENT, format_error(where, "params", "NULL", "required"));
  uint32_t size = 0;
  std::memcpy(&size, params, sizeof size);
  if (size != sizeof(Params) && !(older_size && size == older_size)) {
    const std::string sizes =
        std::to_string(sizeof(Params)) + (older_size ? " (or version 1's " + std::to_string(older_size) + ")" : "");
    return fail(KINDEX_STATUS_INVALID_ARGUMENT,
                format_error(where, "params.struct_size", std::to_string(size),
                             std::string("this reference takes ") + type_name + " of " + sizes +
                                 " bytes: set struct_size = sizeof(" + type_name + ")"));
  }
  std::memcpy(&defaults, params, std::min<size_t>(size, sizeof(Params)));
  defaults.struct_size = sizeof(Params);
  out = defaults;
  return KINDEX_STATUS_OK;
}

// Runs a reference and turns what it throws into cpu_reference.h's statuses (the header says why each).
template <class F>
kindex_status guarded(const char* where, F&& body) {
  try {
    body();
    last_error.clear();
    return KINDEX_STATUS_OK;
  } catch (const InvalidEntry& e) {
    return fail(KINDEX_STATUS_INVALID_INPUT, e.what());
  } catch (const Error& e) {
    return fail(KINDEX_STATUS_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(KINDEX_STATUS_NOT_SUPPORTED, "out of host memory");
  } catch (const std::exception& e) {
    return fail(KINDEX_STATUS_CUDA_ERROR, std::string("unexpected error in ") + where + ": " + e.what());
  } catch (...) {
    return fail(KINDEX_STATUS_CUDA_ERROR, std::string("unexpected error in ") + where + ": not a std::exception");
  }
}

}  // namespace
}  // namespace kindex::reference

extern "C" {

kindex_status kindex_cpu_reference_paged_decode(const kindex_paged_decode_params* params) {
  using namespace kindex::reference;
  kindex_paged_decode_params p;
  kindex_status s = checked("paged_decode", params, "kindex_paged_decode_params", KINDEX_PAGED_DECODE_PARAMS_V1_SIZE,
                            kindex_paged_decode_params(KINDEX_PAGED_DECODE_PARAMS_INIT), p);
  if (s != KINDEX_STATUS_OK) return s;
  return guarded("paged_decode", [&] { paged_decode(p); });
}

kindex_status kindex_cpu_reference_gqa_rope_backward(const kindex_gqa_rope_backward_params* params) {
  using namespace kindex::reference;
  kindex_gqa_rope_backward_params p;
  kindex_status s = checked("gqa_rope_backward", params, "kindex_gqa_rope_backward_params", 0,
                            kindex_gqa_rope_backward_params(KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT), p);
  if (s != KINDEX_STATUS_OK) return s;
  return guarded("gqa_rope_backward", [&] { gqa_rope_backward(p); });
}

const char* kindex_cpu_reference_last_error(void) { return kindex::reference::last_error.c_str(); }

}  // extern "C"
