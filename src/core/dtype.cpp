#include "core/dtype.hpp"

namespace kindex {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::bf16: case DType::f16: return 2;
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::u8: case DType::boolean: case DType::f8e4m3: case DType::f8e5m2: return 1;
  }
  return 0;
}

namespace {

// Each dtype's name (FlashInfer-Bench / SOL-ExecBench / torch spelling) and its safetensors header name.
struct DTypeNames {
  DType type;
  std::string_view name, safetensors;
};
constexpr DTypeNames kDTypeNames[] = {
    {DType::bf16, "bfloat16", "BF16"}, {DType::f16, "float16", "F16"}, {DType::f32, "float32", "F32"},
    {DType::f64, "float64", "F64"},    {DType::i32, "int32", "I32"},   {DType::i64, "int64", "I64"},
    {DType::u8, "uint8", "U8"},        {DType::boolean, "bool", "BOOL"},
    {DType::f8e4m3, "float8_e4m3fn", "F8_E4M3"}, {DType::f8e5m2, "float8_e5m2", "F8_E5M2"},
};

const DTypeNames* names_of(DType t) {
  for (const auto& n : kDTypeNames)
    if (n.type == t) return &n;
  return nullptr;
}

}  // namespace

std::string_view dtype_name(DType t) {
  const DTypeNames* n = names_of(t);
  return n ? n->name : "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "bfloat16" || n == "bf16") return DType::bf16;
  if (n == "float16" || n == "fp16" || n == "f16" || n == "half") return DType::f16;
  if (n == "float32" || n == "fp32" || n == "f32" || n == "float") return DType::f32;
  if (n == "float64" || n == "fp64" || n == "f64" || n == "double") return DType::f64;
  if (n == "int32" || n == "i32") return DType::i32;
  if (n == "int64" || n == "i64") return DType::i64;
  if (n == "uint8" || n == "u8") return DType::u8;
  if (n == "bool" || n == "boolean") return DType::boolean;
  if (n == "float8_e4m3fn" || n == "fp8_e4m3") return DType::f8e4m3;
  if (n == "float8_e5m2" || n == "fp8_e5m2") return DType::f8e5m2;
  return std::nullopt;
}

std::string_view dtype_safetensors_name(DType t) {
  const DTypeNames* n = names_of(t);
  return n ? n->safetensors : "?";
}

std::optional<DType> parse_safetensors_dtype(std::string_view n) {
  for (DType t : {DType::bf16, DType::f16, DType::f32, DType::f64, DType::i32, DType::i64, DType::u8,
                  DType::boolean, DType::f8e4m3, DType::f8e5m2})
    if (dtype_safetensors_name(t) == n) return t;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::bf16 || t == DType::f16 || t == DType::f32 || t == DType::f64 || t == DType::f8e4m3 ||
         t == DType::f8e5m2;
}

}  // namespace kindex
