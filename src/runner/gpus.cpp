#include "runner/gpus.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "core/error.hpp"

namespace kindex::runner {

std::vector<int> gpu_ordinals(const std::string& spec, int available) {
  const std::string machine = available == 0 ? "this machine has no GPU"
                                             : "this machine has " + std::to_string(available) + " (0-" +
                                                   std::to_string(available - 1) + ")";
  if (spec == "all") {
    if (available == 0) throw Error("kindex bench", "--gpus", spec, machine);
    std::vector<int> all(size_t(available), 0);
    for (int i = 0; i < available; ++i) all[size_t(i)] = i;
    return all;
  }
  std::vector<int> out;
  std::stringstream in(spec);
  std::string part;
  while (std::getline(in, part, ',')) {
    int ordinal = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), ordinal);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || ordinal < 0)
      throw Error("kindex bench", "--gpus", part.empty() ? spec : part, "not a GPU ordinal: give all or e.g. 0,2");
    if (ordinal >= available) throw Error("kindex bench", "--gpus", part, "no such GPU: " + machine);
    if (std::find(out.begin(), out.end(), ordinal) != out.end())
      throw Error("kindex bench", "--gpus", part, "named twice");
    out.push_back(ordinal);
  }
  if (out.empty() || spec.back() == ',') throw Error("kindex bench", "--gpus", spec, "not a GPU ordinal: give all or e.g. 0,2");
  return out;
}

}  // namespace kindex::runner
