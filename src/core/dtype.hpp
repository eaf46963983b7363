#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kindex {

// f8e4m3 / f8e5m2: torch.float8_e4m3fn / torch.float8_e5m2 (fp8 KV caches; host conversion in core/half.hpp).
enum class DType : uint8_t { bf16, f16, f32, f64, i32, i64, u8, boolean, f8e4m3, f8e5m2 };

size_t dtype_size(DType t);
// Canonical names as the FlashInfer-Bench / SOL-ExecBench definitions spell them: "bfloat16", "float32", ...
std::string_view dtype_name(DType t);
// Accepts the canonical names and the short ones ("bf16", "fp32", "f32", "int32", "bool", ...).
std::optional<DType> parse_dtype(std::string_view name);
// Safetensors spelling: "BF16", "F32", "I32", ...
std::string_view dtype_safetensors_name(DType t);
std::optional<DType> parse_safetensors_dtype(std::string_view name);
bool is_floating(DType t);

}  // namespace kindex
