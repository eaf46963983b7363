// Fuzzes --gpus (src/runner/gpus.hpp): the first byte is how many GPUs the machine has (0-15), the rest the
// argument. A bad one must be refused with kindex::Error, never another exception or a crash; an accepted one must
// name existing GPUs, each once.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "runner/gpus.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int available = data[0] % 16;
  const std::string spec(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const std::vector<int> gpus = kindex::runner::gpu_ordinals(spec, available);
    if (gpus.empty()) __builtin_trap();
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (gpus[i] < 0 || gpus[i] >= available) __builtin_trap();
      if (std::find(gpus.begin(), gpus.begin() + ptrdiff_t(i), gpus[i]) != gpus.begin() + ptrdiff_t(i)) __builtin_trap();
    }
  } catch (const kindex::Error&) {
  }
  return 0;
}
