#pragma once
// Writes the store as a KernelIndex export.
#include <nlohmann/json.hpp>

#include <string>

#include "store/store.hpp"

namespace kindex::store {

// Writes the store in the KernelIndex export shape (.jsonl.zst when the path ends in .zst, else .jsonl);
// returns row counts per table.
nlohmann::json export_store(Store& store, const std::string& path);

}  // namespace kindex::store
