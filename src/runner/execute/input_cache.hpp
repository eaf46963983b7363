#pragma once
// The generated inputs of the workload being benched, shared by the implementations that run on it one after
// another: each (workload, round seed) is generated once per worker instead of once per implementation (for large
// decode caches generation takes longer than everything else a run does). One workload at a time, within a byte
// budget; what does not fit is generated, used and dropped as before.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "catalog/definition.hpp"
#include "catalog/inputs.hpp"

namespace kindex::runner {

class InputCache {
 public:
  explicit InputCache(size_t budget_bytes) : budget_(budget_bytes) {}
  // generate_inputs(def, w, seed), from the cache when this workload's round was generated before.
  std::shared_ptr<const catalog::Inputs> get(const catalog::Definition& def, const catalog::Workload& w,
                                             uint64_t seed);
  int hits() const { return hits_; }
  int misses() const { return misses_; }
  size_t bytes() const { return bytes_; }

 private:
  size_t budget_;
  std::string workload_;  // definition/uuid of the entries
  std::map<uint64_t, std::shared_ptr<const catalog::Inputs>> by_seed_;
  size_t bytes_ = 0;
  int hits_ = 0, misses_ = 0;
};

// A quarter of the machine's physical memory: the worker's cache budget.
size_t default_input_cache_budget();

}  // namespace kindex::runner
