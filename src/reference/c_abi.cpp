// The CPU references' C ABI (include/kindex/cpu_reference.h): kindex.h's struct_size check, then
// reference::paged_decode / gqa_rope_backward, with what they throw turned into a status and the calling thread's
// last error.
#include "kindex/cpu_reference.h"

#include <exception>
#include <new>
#include <string>

#include "core/error.hpp"
#include "kernels/capi.hpp"
#include "reference/reference.hpp"

namespace kindex::reference {
namespace {

thread_local std::string last_error;

kindex_status fail(kindex_status status, std::string message) {
  last_error = std::move(message);
  return status;
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

// kindex.h's struct_size rule (capi::params_problem, as libkindex.so applies it), then the reference on the
// params as this header's version (an earlier version's fields over `defaults`, its *_PARAMS_INIT).
template <class Params, class F>
kindex_status call(const char* where, const Params* params, Params defaults, F&& reference) {
  if (std::string problem = capi::params_problem(where, params); !problem.empty())
    return fail(KINDEX_STATUS_INVALID_ARGUMENT, std::move(problem));
  const Params p = capi::upgraded(params, defaults);
  return guarded(where, [&] { reference(p); });
}

}  // namespace
}  // namespace kindex::reference

extern "C" {

kindex_status kindex_cpu_reference_paged_decode(const kindex_paged_decode_params* params) {
  using namespace kindex::reference;
  return call("paged_decode", params, kindex_paged_decode_params(KINDEX_PAGED_DECODE_PARAMS_INIT),
              [](const kindex_paged_decode_params& p) { paged_decode(p); });
}

kindex_status kindex_cpu_reference_gqa_rope_backward(const kindex_gqa_rope_backward_params* params) {
  using namespace kindex::reference;
  return call("gqa_rope_backward", params, kindex_gqa_rope_backward_params(KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT),
              [](const kindex_gqa_rope_backward_params& p) { gqa_rope_backward(p); });
}

const char* kindex_cpu_reference_last_error(void) { return kindex::reference::last_error.c_str(); }

}  // extern "C"
