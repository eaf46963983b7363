#include "measure/device.hpp"

#include <cstring>

#ifdef KINDEX_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kindex::measure {

namespace device {

#ifdef KINDEX_HAVE_CUDA

bool built_with_cuda() { return true; }

bool available() { return count() > 0; }

int count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void check(int code, const char* what) {
  auto err = cudaError_t(code);
  if (err == cudaSuccess) return;
  std::string message = std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the next workload starts clean
    throw RunFailure(RunStatus::resource_exceeded, message);
  }
  // Errors that leave the context unusable; everything after them in this process would fail too.
  bool sticky = err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure || err == cudaErrorAssert ||
                err == cudaErrorHardwareStackError || err == cudaErrorIllegalInstruction ||
                err == cudaErrorMisalignedAddress || err == cudaErrorInvalidAddressSpace || err == cudaErrorInvalidPc ||
                err == cudaErrorLaunchTimeout || err == cudaErrorUnknown;
  if (!sticky) cudaGetLastError();
  throw RunFailure(RunStatus::runtime_error, message, sticky);
}

void synchronize(void* stream) { check(cudaStreamSynchronize(cudaStream_t(stream)), "cudaStreamSynchronize"); }

void device_synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

void sleep_while_waiting() {
  unsigned flags = 0;
  if (cudaGetDeviceFlags(&flags) != cudaSuccess) flags = 0;
  flags = (flags & ~unsigned(cudaDeviceScheduleMask)) | cudaDeviceScheduleBlockingSync;
  if (cudaSetDeviceFlags(flags) != cudaSuccess) cudaGetLastError();  // CUDA's default stays
}

void* create_stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return s;
}

void destroy_stream(void* stream) {
  if (stream) cudaStreamDestroy(cudaStream_t(stream));
}

Buffer::Buffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  check(cudaMalloc(&ptr_, bytes), ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str());
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.ptr_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}

Buffer::~Buffer() {
  if (ptr_) cudaFree(ptr_);
}

void copy_to_device(const TensorView& host, const TensorView& dev, void* stream) {
  check(cudaMemcpyAsync(dev.data, host.data, host.nbytes(), cudaMemcpyHostToDevice, cudaStream_t(stream)),
        "cudaMemcpyAsync(host to device)");
}

void copy_to_host(const TensorView& dev, const TensorView& host, void* stream) {
  check(cudaMemcpyAsync(host.data, dev.data, dev.nbytes(), cudaMemcpyDeviceToHost, cudaStream_t(stream)),
        "cudaMemcpyAsync(device to host)");
  synchronize(stream);
}

void copy_device_to_device(const TensorView& src, const TensorView& dst, void* stream) {
  check(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, cudaStream_t(stream)),
        "cudaMemcpyAsync(device to device)");
}

void memset_async(void* ptr, int value, size_t bytes, void* stream) {
  check(cudaMemsetAsync(ptr, value, bytes, cudaStream_t(stream)), "cudaMemsetAsync");
}

size_t l2_cache_bytes() {
  int dev = 0, l2 = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2CacheSize)");
  return size_t(l2);
}

std::string ipc_handle(const void* device_ptr) {
  cudaIpcMemHandle_t h;
  check(cudaIpcGetMemHandle(&h, const_cast<void*>(device_ptr)), "cudaIpcGetMemHandle");
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

void* ipc_open(const std::string& handle) {
  cudaIpcMemHandle_t h;
  if (handle.size() != sizeof h)
    throw RunFailure(RunStatus::runtime_error, "cudaIpcOpenMemHandle: a handle of " + std::to_string(handle.size()) +
                                                   " bytes; CUDA's has " + std::to_string(sizeof h));
  std::memcpy(&h, handle.data(), sizeof h);
  void* ptr = nullptr;
  check(cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  return ptr;
}

void ipc_close(void* ptr) { check(cudaIpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle"); }

#else  // no CUDA in this build

bool built_with_cuda() { return false; }
bool available() { return false; }
int count() { return 0; }
[[noreturn]] static void no_cuda(const char* what) {
  throw RunFailure(RunStatus::runtime_error, std::string(what) + ": kindex was built without CUDA");
}
void check(int code, const char* what) {
  if (code != 0) no_cuda(what);
}
void synchronize(void*) {}
void device_synchronize() {}
void sleep_while_waiting() {}
void* create_stream() { return nullptr; }
void destroy_stream(void*) {}
Buffer::Buffer(size_t bytes) : bytes_(bytes) {
  if (bytes) no_cuda("device allocation");
}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}
Buffer::~Buffer() = default;
void copy_to_device(const TensorView&, const TensorView&, void*) { no_cuda("copy to device"); }
void copy_to_host(const TensorView&, const TensorView&, void*) { no_cuda("copy to host"); }
void copy_device_to_device(const TensorView&, const TensorView&, void*) { no_cuda("device copy"); }
void memset_async(void*, int, size_t, void*) { no_cuda("device memset"); }
size_t l2_cache_bytes() { no_cuda("L2 size"); }
std::string ipc_handle(const void*) { no_cuda("cudaIpcGetMemHandle"); }
void* ipc_open(const std::string&) { no_cuda("cudaIpcOpenMemHandle"); }
void ipc_close(void*) { no_cuda("cudaIpcCloseMemHandle"); }

#endif

void poison(const TensorView& dev, void* stream) { memset_async(dev.data, 0xFF, dev.nbytes(), stream); }

}  // namespace device
}  // namespace kindex::measure
