#pragma once
#include <string>

#include "kindex/kindex.h"

namespace kindex::capi {
// Records `message` as the calling thread's last error and returns `status`.
kindex_status fail(kindex_status status, const std::string& message);
void clear_error();

// An entry point's first check: `params` is non-NULL and its leading struct_size is a size this library knows
// (kindex.h: today exactly sizeof the struct). Reads nothing past struct_size. Records the error on failure.
kindex_status check_params(const char* where, const void* params, size_t known_size, const char* type_name);
}  // namespace kindex::capi
