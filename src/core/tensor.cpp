#include "core/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "core/half.hpp"

namespace kindex {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

double TensorView::get(int64_t i) const {
  if (where != Where::host) throw std::logic_error("TensorView::get on a device tensor");
  switch (dtype) {
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::f16: return f16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::f64: return static_cast<const double*>(data)[i];
    case DType::i32: return static_cast<const int32_t*>(data)[i];
    case DType::i64: return double(static_cast<const int64_t*>(data)[i]);
    case DType::u8: return static_cast<const uint8_t*>(data)[i];
    case DType::boolean: return static_cast<const uint8_t*>(data)[i] ? 1.0 : 0.0;
    case DType::f8e4m3: return fp8_e4m3_to_float(static_cast<const uint8_t*>(data)[i]);
    case DType::f8e5m2: return fp8_e5m2_to_float(static_cast<const uint8_t*>(data)[i]);
  }
  return 0.0;
}

void TensorView::set(int64_t i, double v) const {
  if (where != Where::host) throw std::logic_error("TensorView::set on a device tensor");
  switch (dtype) {
    case DType::bf16: static_cast<uint16_t*>(data)[i] = float_to_bf16(float(v)); break;
    case DType::f16: static_cast<uint16_t*>(data)[i] = float_to_f16(float(v)); break;
    case DType::f32: static_cast<float*>(data)[i] = float(v); break;
    case DType::f64: static_cast<double*>(data)[i] = v; break;
    case DType::i32: static_cast<int32_t*>(data)[i] = int32_t(v); break;
    case DType::i64: static_cast<int64_t*>(data)[i] = int64_t(v); break;
    case DType::u8: static_cast<uint8_t*>(data)[i] = uint8_t(v); break;
    case DType::boolean: static_cast<uint8_t*>(data)[i] = v != 0.0; break;
    case DType::f8e4m3: static_cast<uint8_t*>(data)[i] = float_to_fp8_e4m3(float(v)); break;
    case DType::f8e5m2: static_cast<uint8_t*>(data)[i] = float_to_fp8_e5m2(float(v)); break;
  }
}

void Tensor::Free::operator()(void* p) const { std::free(p); }

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in " + shape_string(shape_));
  size_t bytes = (nbytes() + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes ? bytes : 64);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes ? bytes : 64);
  data_ = std::shared_ptr<void>(p, Free{});
}

TensorView Tensor::view() const {
  return TensorView{dtype_, shape_, contiguous_strides(shape_), data_.get(), Where::host};
}

}  // namespace kindex
