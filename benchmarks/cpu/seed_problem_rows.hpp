#pragma once
// What the host CPU benchmarks share: a clock, and their frame of one JSON row per seed problem (the main job's:
// catalog::seed_problems) over its source's correctness rounds, each row naming the problem, its workloads and
// rounds beside what the benchmark measured on it, and the measures' totals.
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "catalog/builtin.hpp"

namespace kindex::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct SeedProblemRows {
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json total = nlohmann::json::object();  // each measure summed over the problems
};

// measure(problem, rounds) -> a JSON object of that problem's measures (numbers).
template <class Measure>
SeedProblemRows seed_problem_rows(Measure measure) {
  SeedProblemRows out;
  for (const std::string& name : catalog::seed_problems()) {
    const catalog::Problem problem = catalog::builtin_problem(name);
    const int rounds = catalog::correctness_rounds(problem.definition.source);
    const nlohmann::json measures = measure(problem, rounds);
    nlohmann::json row = {{"problem", name}, {"workloads", problem.workloads.size()}, {"rounds", rounds}};
    for (const auto& [key, value] : measures.items()) {
      row[key] = value;
      out.total[key] = out.total.value(key, 0.0) + value.template get<double>();
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace kindex::bench
