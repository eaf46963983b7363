#pragma once
// Entry points of a library opened with dlopen at run time (CUPTI, NVML, kindex's own libraries), one way:
// resolve(handle, fn, "symbol") sets a typed function pointer, or nullptr where the library lacks the symbol.
#include <dlfcn.h>

namespace kindex {

template <class Fn>
bool resolve(void* handle, Fn& fn, const char* symbol) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return fn != nullptr;
}

}  // namespace kindex
