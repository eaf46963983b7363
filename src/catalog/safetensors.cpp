#include "catalog/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace kindex::catalog {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference implementation

uint64_t read_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | uint8_t(p[i]);
  return v;
}

}  // namespace

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& where) {
  if (bytes.size() < 8) throw Error(where, "header length", std::to_string(bytes.size()) + " bytes", "file too short");
  uint64_t header_len = read_le64(bytes.data());
  if (header_len > kMaxHeaderBytes || header_len > bytes.size() - 8)
    throw Error(where, "header length", std::to_string(header_len),
                "larger than the file (" + std::to_string(bytes.size()) + " bytes) or the 100 MB limit");
  std::string_view header_text = bytes.substr(8, header_len);
  std::string_view data = bytes.substr(8 + header_len);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(where, "header", "byte " + std::to_string(e.byte), std::string("malformed JSON header: ") + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large to represent
    throw Error(where, "header", "", std::string("malformed JSON header: ") + e.what());
  }
  if (!header.is_object()) throw Error(where, "header", header.type_name(), "expected a JSON object");

  SafetensorsFile out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(where, "__metadata__", entry.type_name(), "expected an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw Error(where, "__metadata__." + k, v.dump(), "expected a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) throw Error(where, name, entry.type_name(), "expected a tensor entry object");
    for (const auto& [k, v] : entry.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets") throw Error(where, name + "." + k, "", "unknown key");
    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string())
      throw Error(where, name + ".dtype", "", "missing or not a string");
    auto dtype = parse_safetensors_dtype(dtype_it->get<std::string>());
    if (!dtype) throw Error(where, name + ".dtype", dtype_it->get<std::string>(), "unknown or unsupported dtype");

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array())
      throw Error(where, name + ".shape", "", "missing or not a list");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& d : *shape_it) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        throw Error(where, name + ".shape", shape_it->dump(), "dimensions must be non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > uint64_t(std::numeric_limits<int64_t>::max()) / dim)
        throw Error(where, name + ".shape", shape_it->dump(), "element count overflows");
      numel *= dim;
      shape.push_back(int64_t(dim));
    }
    if (shape.size() > 16) throw Error(where, name + ".shape", shape_it->dump(), "more than 16 dimensions");

    auto off_it = entry.find("data_offsets");
    if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
        !(*off_it)[1].is_number_unsigned())
      throw Error(where, name + ".data_offsets", off_it == entry.end() ? "" : off_it->dump(),
                  "expected [begin, end] as non-negative integers");
    uint64_t begin = (*off_it)[0].get<uint64_t>(), end = (*off_it)[1].get<uint64_t>();
    if (begin > end || end > data.size())
      throw Error(where, name + ".data_offsets", off_it->dump(),
                  "outside the data buffer of " + std::to_string(data.size()) + " bytes");
    uint64_t size = dtype_size(*dtype);
    if (numel > std::numeric_limits<uint64_t>::max() / size || numel * size != end - begin)
      throw Error(where, name + ".data_offsets", off_it->dump(),
                  "holds " + std::to_string(end - begin) + " bytes but shape " + shape_string(shape) + " of " +
                      std::string(dtype_name(*dtype)) + " needs " + std::to_string(numel) + " x " +
                      std::to_string(size));
    ranges.emplace_back(begin, end);
    Tensor t(*dtype, shape);
    if (end > begin) std::memcpy(t.data(), data.data() + begin, end - begin);
    out.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw Error(where, "data_offsets", std::to_string(ranges[i].first), "tensor data ranges overlap");
  return out;
}

SafetensorsFile read_safetensors(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string(), "", "", "cannot open safetensors file");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_safetensors(s.str(), file.string());
}

std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", dtype_safetensors_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the format pads the header with spaces to 8-byte alignment
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  out += h;
  for (const auto& [name, t] : tensors) out.append(static_cast<const char*>(t.data()), t.nbytes());
  return out;
}

void write_safetensors(const std::filesystem::path& file, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string bytes = serialize_safetensors(tensors, metadata);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(file.string(), "", "", "cannot create file");
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw Error(file.string(), "", "", "write failed");
}

}  // namespace kindex::catalog
