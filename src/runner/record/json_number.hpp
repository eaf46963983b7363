#pragma once
// JSON has no inf or NaN: write them as the strings pydantic uses for FlashInfer-Bench / SOL-ExecBench traces
// ("Infinity", "-Infinity", "NaN"), and read either form back.
#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace kindex::runner {

inline nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

inline double number_from_json(const nlohmann::json& j, double fallback = 0) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return fallback;
}

}  // namespace kindex::runner
