#pragma once
// A thin layer over the CUDA runtime: device detection, owning device buffers, copies and error classification.
// Compiles without CUDA (every call then throws RunFailure "built without CUDA"), so the CPU path links the same
// code.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "measure/run_failure.hpp"
#include "core/tensor.hpp"

namespace kindex::measure {

namespace device {

bool built_with_cuda();
// A CUDA device is present and usable (initialises CUDA in this process).
bool available();
// How many CUDA devices this process sees (initialises CUDA); 0 without CUDA or a GPU.
int count();
// Throws RunFailure classified by the CUDA error code when `code` (a cudaError_t) is not success.
void check(int code, const char* what);
void synchronize(void* stream);
// Waits for all work on the device; a sticky error from any earlier call surfaces here.
void device_synchronize();
// This process's waits for the GPU (stream, device and event synchronisation) sleep instead of spinning a core
// (cudaDeviceScheduleBlockingSync): a run waits through seconds of GPU work (the timing trials), and a host with few
// cores needs them for the runner and the other processes. Timing reads GPU timestamps, so it is unaffected; a wait
// ends a few microseconds later. Best effort: a failure leaves CUDA's default.
void sleep_while_waiting();
void* create_stream();
void destroy_stream(void* stream);

// Device memory, freed on destruction. Allocation failures throw RunFailure(resource_exceeded).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  Buffer(Buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

void copy_to_device(const TensorView& host, const TensorView& dev, void* stream);
void copy_to_host(const TensorView& dev, const TensorView& host, void* stream);
void copy_device_to_device(const TensorView& src, const TensorView& dst, void* stream);
// Fills with 0xFF bytes (NaN for every float dtype, -1 for ints): an output an implementation did not write
// cannot pass by accident.
void poison(const TensorView& dev, void* stream);
void memset_async(void* ptr, int value, size_t bytes, void* stream);
size_t l2_cache_bytes();

// CUDA IPC, both sides. The runner hands its output buffers to kindex's Python solution worker this way, so a
// solution's outputs (L2/003's are ~100 MB a round) reach the device comparator without a trip through the host.
// ipc_handle: the cudaIpcMemHandle_t (its 64 bytes) of the allocation starting at `device_ptr` (a Buffer's get()).
// ipc_open maps such a handle of another process here (the exporter must keep the allocation while it is open);
// ipc_close unmaps it.
std::string ipc_handle(const void* device_ptr);
void* ipc_open(const std::string& handle);
void ipc_close(void* ptr);

}  // namespace device
}  // namespace kindex::measure
