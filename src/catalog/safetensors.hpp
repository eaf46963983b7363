#pragma once
// The safetensors format: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__"?: {str: str}}, then the data buffer. The reader validates the
// header JSON, every dtype, shape against byte length, and offsets inside the buffer and not overlapping.
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "core/tensor.hpp"

namespace kindex::catalog {

struct SafetensorsFile {
  std::map<std::string, kindex::Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// `where` names the source in errors. Throws kindex::Error on any malformed content.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& where);
SafetensorsFile read_safetensors(const std::filesystem::path& file);
std::string serialize_safetensors(const std::map<std::string, kindex::Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
void write_safetensors(const std::filesystem::path& file, const std::map<std::string, kindex::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kindex::catalog
