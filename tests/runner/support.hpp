#pragma once
// Helpers shared by the runner's tests: a scratch directory and the fault-injection libraries built on demand.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/runner.hpp"

#include "support/paths.hpp"

namespace kindex::test {

inline std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kindex-bench-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A FlashInfer-Bench solution in Python for `definition` (entry point main.py::run), main.py being `source`.
inline nlohmann::json python_solution(const std::string& name, const std::string& definition,
                                      const std::string& hardware, const std::string& source, bool dps) {
  return {{"name", name},
          {"definition", definition},
          {"author", "kindex tests"},
          {"spec",
           {{"language", "python"},
            {"target_hardware", {hardware}},
            {"entry_point", "main.py::run"},
            {"destination_passing_style", dps}}},
          {"sources", {{{"path", "main.py"}, {"content", source}}}}};
}

// Writes a solution document into a fresh scratch folder `dir_name`; returns its path.
inline std::string write_solution(const nlohmann::json& doc, const std::string& dir_name) {
  const std::string path = (scratch_dir(dir_name) / (doc.value("name", "solution") + ".json")).string();
  std::ofstream(path) << doc.dump(1);
  return path;
}

// One round, one timed call, no warm-up, judged against the CPU reference: the quickest honest bench.
// The H200 of the project's device runs, as the runner's environment records it (set in place: a captured
// environment keeps its host facts).
inline void describe_h200(runner::Environment& e) {
  e.has_gpu = true;
  e.gpu_name = "NVIDIA H200";
  e.architecture = "sm_90";
  e.memory_bytes = 150754820096;
  e.driver_version = "580.159.04";
  e.cuda_runtime_version = e.cuda_toolkit = "13.0";
  e.libraries = {{"cublaslt", "13.0.2"}};
}

// A run's result without what depends on when or where it ran (its times, the ratios and scores derived from them,
// the floors of rates measured at the start, its GPU labels): what two benches of the same runs must agree on
// (--gpus against one runner).
inline nlohmann::json run_content(const runner::RunResult& r) {
  nlohmann::json j = r.to_json();
  for (const char* timed : {"timing", "reference_timing", "wall_s", "observed_at", "phases_s", "speedup_factor",
                            "headroom_ratio", "kindex_floor_ratio", "sol_score", "floors", "plan_host_s", "labels"})
    j.erase(timed);
  return j;
}

inline runner::BenchOptions quick_options(std::vector<std::string> impls, int iterations = 1) {
  runner::BenchOptions o;
  o.implementations = std::move(impls);
  o.reference = "cpu-reference";
  o.trials = 1;
  o.iterations = iterations;
  o.warmup = 0;
  return o;
}

// The C compiler this build was configured with (CMakeCache.txt), falling back to cc.
inline std::string c_compiler() {
  std::ifstream cache(binary_dir() + "/CMakeCache.txt");
  std::string line;
  const std::string key = "CMAKE_C_COMPILER:";
  while (std::getline(cache, line))
    if (line.rfind(key, 0) == 0) return line.substr(line.find('=') + 1);
  return "cc";
}

// Builds tests/runner/external/fake_decode.c with KX_MODE=mode into a shared library; returns its path
// ("" and a test failure if the compiler fails).
inline std::string fake_decode_library(int mode) {
  auto dir = std::filesystem::temp_directory_path() / ("kindex-fake-decode-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto lib = dir / ("libfake_decode_" + std::to_string(mode) + ".so");
  if (std::filesystem::exists(lib)) return lib.string();
  std::string cmd = c_compiler() + " -shared -fPIC -O1 -DKX_MODE=" + std::to_string(mode) + " -I" + source_dir() +
                    "/include " + source_dir() + "/tests/runner/external/fake_decode.c -o " + lib.string() + " -lm";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return rc == 0 ? lib.string() : "";
}

}  // namespace kindex::test
