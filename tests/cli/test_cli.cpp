// `kindex bench` as a user meets it: bad arguments name the argument and the value and exit non-zero; a small
// CPU-path run prints machine-readable JSON. Runs the built executable.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "bench/support.hpp"
#include "support/paths.hpp"

namespace {

struct Outcome {
  int code = -1;
  std::string output;  // stdout and stderr together
};

std::string kindex_binary() { return kindex::test::binary_dir() + "/bin/kindex"; }

Outcome run(const std::string& args, bool merge_stderr = true) {
  std::string cmd = kindex_binary() + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  Outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.output.append(buf.data(), n);
  int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kindex_binary())) GTEST_SKIP() << kindex_binary() << " is not built";
  }
};

const std::string kProblem = "--problem gqa_paged_decode_h32_kv4_d128_ps1 --out '' --store none ";

}  // namespace

TEST_F(BenchCli, BadArgumentsNameTheArgumentAndTheValue) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"bench --problem no_such_problem", "--problem = no_such_problem"},
      {"bench", "--problem"},
      {"bench " + kProblem + "--impl triton", "--impl = triton"},
      {"bench " + kProblem + "--impl external:/no/such/lib.so", "no such shared library"},
      {"bench " + kProblem + "--workloads 0-9999", "--workloads = 0-9999"},
      {"bench " + kProblem + "--workloads nonsense-uuid", "--workloads = nonsense-uuid"},
      {"bench " + kProblem + "--trials 0", "--trials"},
      {"bench " + kProblem + "--iterations -3", "--iterations"},
      {"bench " + kProblem + "--timeout 0", "--timeout"},
      {"bench " + kProblem + "--reference numpy", "--reference"},
  };
  for (const auto& c : cases) {
    Outcome o = run(c.args);
    EXPECT_NE(o.code, 0) << c.args << "\n" << o.output;
    EXPECT_NE(o.output.find(c.expect), std::string::npos) << c.args << "\n" << o.output;
  }
}

TEST_F(BenchCli, ListsTheBundledProblems) {
  Outcome o = run("bench --list");
  EXPECT_EQ(o.code, 0) << o.output;
  EXPECT_NE(o.output.find("gqa_paged_decode_h24_kv4_d128_ps64"), std::string::npos);
  EXPECT_NE(o.output.find("003_grouped_query_attention_with_rope_backward"), std::string::npos);
}

TEST_F(BenchCli, CpuPathRunPrintsJson) {
  Outcome o = run("bench " + kProblem +
                      "--workloads 0 --impl cpu-reference --reference cpu-reference --trials 2 --iterations 2 "
                      "--warmup 0 --json",
                  false);
  ASSERT_EQ(o.code, 0) << o.output;
  auto j = nlohmann::json::parse(o.output);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["status"], "passed");
  EXPECT_EQ(j["results"][0]["implementation"], "cpu-reference");
  EXPECT_TRUE(j["environment"].contains("cpu_threads"));
}

TEST_F(BenchCli, ExitCodesSayWhetherEveryRunPassed) {
  // 1: a run failed correctness (an external library that adds 0.5 to every output); 2: a bad argument.
  const std::string wrong = kindex::test::fake_decode_library(3);
  Outcome o = run("bench " + kProblem + "--workloads 0 --impl external:" + wrong +
                  " --reference cpu-reference --trials 1 --iterations 1 --warmup 0");
  EXPECT_EQ(o.code, 1) << o.output;
  EXPECT_NE(o.output.find("incorrect_numerical"), std::string::npos) << o.output;
  EXPECT_EQ(run("bench " + kProblem + "--impl external:/no/such/lib.so").code, 2);
}
