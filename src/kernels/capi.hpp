#pragma once
#include <string>

#include "kindex/kindex.h"

namespace kindex::capi {
// Records `message` as the calling thread's last error and returns `status`.
kindex_status fail(kindex_status status, const std::string& message);
void clear_error();
}  // namespace kindex::capi
