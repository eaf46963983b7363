#pragma once
// The one tensor type of kindex: a view (dtype, shape, strides, pointer, where it lives) and an owning host
// tensor that hands out views. Strides are in elements; the default is dense row-major.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace kindex {

enum class Where : uint8_t { host, device };

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
int64_t shape_numel(const std::vector<int64_t>& shape);
std::string shape_string(const std::vector<int64_t>& shape);  // "[2, 32, 128]"

struct TensorView {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  void* data = nullptr;
  Where where = Where::host;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  bool is_contiguous() const { return strides == contiguous_strides(shape); }
  template <class T> T* ptr() const { return static_cast<T*>(data); }
  // Element i (row-major order, contiguous views only) converted to double; host views only.
  double get(int64_t i) const;
  void set(int64_t i, double v) const;
};

// Owning, 64-byte aligned, dense host tensor. Zero-initialised.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape);
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <class T> T* ptr() { return static_cast<T*>(data()); }
  template <class T> const T* ptr() const { return static_cast<const T*>(data()); }
  TensorView view() const;
  double get(int64_t i) const { return view().get(i); }
  void set(int64_t i, double v) { view().set(i, v); }

 private:
  struct Free { void operator()(void* p) const; };
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  std::shared_ptr<void> data_;
};

}  // namespace kindex
