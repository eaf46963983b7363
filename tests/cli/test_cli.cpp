// `kindex` as a user meets it: bad arguments name the argument and the value and exit non-zero; a small
// CPU-path run prints machine-readable JSON; the main job, `records` and `serve` share one store and lead from
// one to the next; `kindex rerun` records a rerun linked to the run it re-measured, or says why it cannot. Runs the
// built executable.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "cli/support.hpp"
#include "runner/support.hpp"
#include "store/query.hpp"
#include "store/store.hpp"
#include "support/paths.hpp"
#include "web/pages.hpp"

namespace {

using kindex::test::kindex_binary;
using kindex::test::Outcome;
using kindex::test::run_shell;
using kindex::test::WorkDir;

Outcome run(const std::string& args, bool merge_stderr = true) {
  return run_shell(kindex_binary() + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kindex_binary())) GTEST_SKIP() << kindex_binary() << " is not built";
  }
};

const std::string kProblem = "--problem gqa_paged_decode_h32_kv4_d128_ps1 --out '' --store none ";

// `kindex serve ...` started in `dir`; the port it printed; stopped (SIGTERM) on destruction.
class ServeProcess {
 public:
  ServeProcess(const std::filesystem::path& dir, const std::string& args) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      close(out[0]);
      close(out[1]);
      if (chdir(dir.c_str()) != 0) _exit(127);
      unsetenv("KINDEX_STORE");
      std::string cmd = "exec " + kindex_binary() + " serve " + args;
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    // Its first lines: which store, then the URL (or the error that stopped it).
    FILE* f = fdopen(out[0], "r");
    char line[1024];
    while (fgets(line, sizeof line, f)) {
      output_ += line;
      std::smatch m;
      std::string l = line;
      if (std::regex_search(l, m, std::regex("http://127\\.0\\.0\\.1:(\\d+)/"))) {
        port_ = std::stoi(m[1]);
        break;
      }
    }
    pipe_ = f;
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (pipe_) fclose(pipe_);
  }
  int port() const { return port_; }
  const std::string& output() const { return output_; }
  // Waits for the process to end by itself (true) within `seconds`; its exit code in `code`.
  bool exited(int seconds, int& code) {
    for (int i = 0; i < seconds * 10; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        char line[1024];
        while (pipe_ && fgets(line, sizeof line, pipe_)) output_ += line;
        return true;
      }
      usleep(100000);
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  FILE* pipe_ = nullptr;
  std::string output_;
};

class IndexCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kindex_binary())) GTEST_SKIP() << kindex_binary() << " is not built";
  }
};

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
      {"bench " + kProblem + "--baseline /no/such/baseline.json", "--baseline: /no/such/baseline.json: cannot be read"},
      {"bench " + kProblem + "--impl solution:/no/such/solution.json", "--impl = solution:/no/such/solution.json"},
      {"bench " + kProblem + "--peer triton", "--peer: triton not in"},
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

class CatalogCli : public BenchCli {};

TEST_F(CatalogCli, ExportWritesTheSeedDecodeProblemsAsAFlashInferBenchDataset) {
  WorkDir dir;
  Outcome o = dir.run("catalog export --out ds");
  ASSERT_EQ(o.code, 0) << o.output;
  EXPECT_NE(o.output.find("gqa_paged_decode_h32_kv4_d128_ps1: 48 workloads"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("gqa_paged_decode_h24_kv4_d128_ps64: 20 workloads"), std::string::npos) << o.output;
  // What it wrote is a dataset kindex itself loads and checks (every page table against the constraints).
  Outcome check = dir.run("catalog check ds");
  EXPECT_EQ(check.code, 0) << check.output;
  EXPECT_NE(check.output.find("2 definitions, 68 workloads, 0 errors"), std::string::npos) << check.output;

  Outcome bad = dir.run("catalog export no_such_problem --out ds2");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("definition = no_such_problem"), std::string::npos) << bad.output;
  Outcome format = dir.run("catalog export --format sol-execbench --out ds2");
  EXPECT_NE(format.code, 0);
  EXPECT_NE(format.output.find("--format"), std::string::npos) << format.output;
}

// The model suite (definitions/model_suite) exports through `--dataset`, and the files are what a harness reads: its
// own stdlib reader (read_export.py) finds every table consistent with its workload line and its distribution, and
// notices a table that is another workload's.
TEST_F(CatalogCli, ExportsTheModelSuiteForAReaderOfItsOwn) {
  if (run_shell("python3 --version").code != 0) GTEST_SKIP() << "no python3";
  WorkDir dir;
  const std::string suite = kindex::test::source_dir() + "/definitions/model_suite";
  Outcome o = dir.run("catalog export --dataset '" + suite + "' --out ds gqa_paged_decode_h20_kv4_d128_ps64 "
                      "gqa_paged_decode_h8_kv2_d64_ps64 gqa_paged_decode_h16_kv2_d128_ps64");
  ASSERT_EQ(o.code, 0) << o.output;
  EXPECT_NE(o.output.find("(3 definitions, 7 workloads)"), std::string::npos) << o.output;
  const std::string reader = "cd '" + dir.path.string() + "' && python3 '" + suite + "/read_export.py' ds 2>&1";
  Outcome read = run_shell(reader);
  EXPECT_EQ(read.code, 0) << read.output;
  EXPECT_NE(read.output.find("7 workloads read (equal 3, long_tail 2, one_long 2), 0 errors"), std::string::npos)
      << read.output;
  // One workload's file replaced by another's: the reader names the workload.
  std::vector<std::filesystem::path> blobs;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path / "ds" / "blob"))
    if (e.path().string().find("h8_kv2_d64_ps64") != std::string::npos && e.path().extension() == ".safetensors")
      blobs.push_back(e.path());
  ASSERT_EQ(blobs.size(), 3u);
  std::filesystem::copy_file(blobs[0], blobs[1], std::filesystem::copy_options::overwrite_existing);
  Outcome tampered = run_shell(reader);
  EXPECT_EQ(tampered.code, 1) << tampered.output;
  EXPECT_NE(tampered.output.find(blobs[1].stem().string() + ": the file is workload"), std::string::npos)
      << tampered.output;

  Outcome missing = dir.run("catalog export --dataset '" + suite + "' --out ds2 gqa_paged_decode_h99_kv1_d128_ps1");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.output.find("definition = gqa_paged_decode_h99_kv1_d128_ps1"), std::string::npos) << missing.output;
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

TEST_F(IndexCli, MainJobThenRecordsThenServeShowTheRunsJustMade) {
  WorkDir dir;
  // The main job on the CPU path, one workload per seed problem.
  Outcome main_job = dir.run("--workloads 0");
  ASSERT_EQ(main_job.code, 0) << main_job.output;
  ASSERT_TRUE(std::filesystem::exists(dir.path / "kindex-results" / "kindex.db"));
  // Its last lines name the next two commands.
  const std::string problem = "gqa_paged_decode_h32_kv4_d128_ps1";
  auto tail = main_job.output.substr(main_job.output.rfind("next:"));
  EXPECT_NE(tail.find("`kindex serve` at http://127.0.0.1:8080/operations/" + problem), std::string::npos) << tail;
  EXPECT_NE(tail.find("`kindex records " + problem + "`"), std::string::npos) << tail;

  // records, as printed, finds the run just made (no --store: the same default store).
  Outcome records = dir.run("records " + problem);
  ASSERT_EQ(records.code, 0) << records.output;
  EXPECT_NE(records.output.find("kindex: store kindex-results/kindex.db ("), std::string::npos) << records.output;
  EXPECT_NE(records.output.find("record: "), std::string::npos) << records.output;
  EXPECT_EQ(records.output.find("record: none"), std::string::npos) << records.output;
  auto listed = nlohmann::json::parse(dir.run("records --json " + problem, "", true).output);
  ASSERT_FALSE(listed.empty());
  const std::string run_id = listed[0]["record"]["id"];
  EXPECT_FALSE(std::filesystem::exists(dir.path / "kindex.db")) << "a second store appeared in the working directory";

  // serve, as printed (on a free port here), shows the same run on the operation page.
  ServeProcess serve(dir.path, "--port 0");
  ASSERT_GT(serve.port(), 0) << serve.output();
  EXPECT_NE(serve.output().find("store kindex-results/kindex.db"), std::string::npos) << serve.output();
  httplib::Client c("127.0.0.1", serve.port());
  auto page = c.Get(("/operations/" + problem).c_str());
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("/runs/" + run_id), std::string::npos) << "the operation page does not list run " << run_id;
  auto run = c.Get(("/api/runs/" + run_id).c_str());
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, 200);
}

TEST_F(IndexCli, ReadOnlyCommandsNameTheirStoreAndNeverCreateOne) {
  WorkDir dir;
  for (const std::string args : {"records", "search gqa", "show operation x", "serve --port 0"}) {
    Outcome o = dir.run(args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.output;
    EXPECT_NE(o.output.find("kindex-results/kindex.db: does not exist"), std::string::npos) << args << "\n" << o.output;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path)) << "a read-only command created files";
  // $KINDEX_STORE and --store choose another store, and say so.
  Outcome env = dir.run("records", "KINDEX_STORE=elsewhere.db");
  EXPECT_NE(env.output.find("elsewhere.db: does not exist"), std::string::npos) << env.output;
  Outcome imported = dir.run("import --store mine.db " + kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst");
  ASSERT_EQ(imported.code, 0) << imported.output;
  EXPECT_NE(imported.output.find("kindex: store mine.db (0 runs)"), std::string::npos) << imported.output;
  Outcome search = dir.run("search h24", "KINDEX_STORE=mine.db");
  EXPECT_EQ(search.code, 0) << search.output;
  EXPECT_NE(search.output.find("kindex: store mine.db (347 runs)"), std::string::npos) << search.output;
  EXPECT_NE(search.output.find("gqa_paged_decode_h24_kv4_d128_ps64"), std::string::npos) << search.output;
  // An existing but empty store is pointed out, not shown as an empty index without comment.
  ASSERT_EQ(dir.run("import --store empty.db " + kindex::test::data_dir() + "/kernelindex/examples/benchmark-protocol.yaml").code, 0);
  Outcome empty = dir.run("records --store empty.db");
  EXPECT_NE(empty.output.find("(0 runs): empty"), std::string::npos) << empty.output;
}

TEST_F(IndexCli, SecondServeOnAPortInUseFailsClearly) {
  WorkDir dir;
  ASSERT_EQ(dir.run("import --store s.db " + kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst").code, 0);
  ServeProcess first(dir.path, "--store s.db --port 0");
  ASSERT_GT(first.port(), 0) << first.output();
  ServeProcess second(dir.path, "--store s.db --port " + std::to_string(first.port()));
  int code = -1;
  ASSERT_TRUE(second.exited(10, code)) << "a second server started on port " << first.port() << ": " << second.output();
  EXPECT_EQ(code, 2);
  EXPECT_NE(second.output().find("address already in use"), std::string::npos) << second.output();
}

namespace {

// A store holding FlashInfer-Bench's H200 lines for the ps1 seed problem's first workload (kindex's solution and
// FlashInfer's baseline), imported as a user would; `trace` replaces the fixture when given.
class RerunCli : public IndexCli {
 protected:
  void SetUp() override {
    IndexCli::SetUp();
    if (IsSkipped()) return;
    import_trace(kindex::test::data_dir() + "/harness-traces/h200_fib_ps1.jsonl");
  }
  void import_trace(const std::string& trace) {
    Outcome o = dir.run("import --store s.db --definitions " + kindex::test::data_dir() +
                        "/specs/flashinfer-trace/definitions " + trace);
    ASSERT_EQ(o.code, 0) << o.output;
  }
  // The id of the imported run whose implementation title starts with `title`.
  std::string run_of(const std::string& title) {
    auto s = kindex::store::Store::open((dir.path / "s.db").string());
    auto rows = s->db().query(
        "SELECT r.id FROM benchmark_runs r JOIN implementations i ON i.id = r.implementation_id WHERE i.title LIKE ? "
        "AND r.origin <> 'kindex'",
        {title + "%"});
    return rows.size() == 1 ? rows[0].text(0) : "";
  }
  nlohmann::json show(const std::string& id, const std::string& store = "s.db") {
    Outcome o = dir.run("show run " + id + " --json --store " + store, "", true);
    return o.code == 0 ? nlohmann::json::parse(o.output) : nlohmann::json();
  }
  WorkDir dir;
  const std::string kSmall = " --store s.db --out '' --trials 1 --iterations 2 --warmup 0";
};

}  // namespace

TEST_F(RerunCli, RerunOfAnImportedRunIsStoredLinkedAndBothPagesShowIt) {
  const std::string original = run_of("flashinfer_decode");
  ASSERT_FALSE(original.empty());
  const nlohmann::json before = show(original);
  ASSERT_TRUE(before.is_object());
  EXPECT_TRUE(before["reruns"].empty());

  // FlashInfer's baseline maps to the flashinfer peer, absent on this machine's CPU path: --impl runs the CPU
  // reference instead, under FlashInfer-Bench's protocol.
  Outcome o = dir.run("rerun " + original + kSmall + " --impl cpu-reference");
  ASSERT_EQ(o.code, 0) << o.output;
  EXPECT_NE(o.output.find("reported 192.5 µs (mean) on NVIDIA H200; rerun here with cpu-reference instead: "),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("flashinfer-bench protocol"), std::string::npos) << o.output;

  const nlohmann::json after = show(original);
  ASSERT_EQ(after["reruns"].size(), 1u) << after.dump(2);
  const nlohmann::json& link = after["reruns"][0];
  const std::string rerun = link["rerun"]["id"];
  EXPECT_EQ(link["original"]["id"], original);
  EXPECT_EQ(link["rerun"]["status"], "passed");
  // The original's row and manifest are as they were (a CPU rerun verifies nothing: its evidence stays reported).
  EXPECT_EQ(after["run"], before["run"]);
  EXPECT_EQ(after["manifest"], before["manifest"]);
  EXPECT_EQ(after["run"]["evidence"], "reported");

  // The rerun is a run of its own, in this machine's environment, naming the original by its runDigest.
  const nlohmann::json r = show(rerun);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["rerunOf"]["id"], original);
  EXPECT_EQ(r["manifest"]["run"]["metadata"]["labels"]["reproduces_run"], before["run"]["runDigest"]);
  EXPECT_EQ(r["manifest"]["run"]["metadata"]["labels"]["rerun_same_implementation"], "false");  // not FlashInfer's
  EXPECT_NE(r["run"]["environmentKey"], before["run"]["environmentKey"]);
  EXPECT_EQ(r["run"]["origin"], "kindex");

  // Both run pages and the original's workload page show the pair, each linking the other run.
  auto s = kindex::store::Store::open((dir.path / "s.db").string());
  const std::string original_page = kindex::web::run_page(kindex::store::run_view(*s, original));
  EXPECT_NE(original_page.find(" instead: <a href=\"/runs/" + rerun + "\">"), std::string::npos) << original_page;
  EXPECT_NE(original_page.find("rerun here with cpu-reference"), std::string::npos) << original_page;
  EXPECT_NE(original_page.find("reported <a href=\"/runs/" + original + "\">192.5 µs (mean) on NVIDIA H200</a>"),
            std::string::npos);
  const std::string rerun_page = kindex::web::run_page(kindex::store::run_view(*s, rerun));
  EXPECT_NE(rerun_page.find("This run re-measured <a href=\"/runs/" + original + "\">"), std::string::npos) << rerun_page;
  const std::string workload_page =
      kindex::web::workload_page(kindex::store::workload_view(*s, before["workloadId"].get<std::string>()));
  EXPECT_NE(workload_page.find(" instead: <a href=\"/runs/" + rerun + "\">"), std::string::npos) << workload_page;
}

TEST_F(RerunCli, AHarnessRunOfKindexsSolutionIsRerunAsKindexAndRecordedWhateverItsOutcome) {
  // FlashInfer-Bench's run of kindex's solution maps to kindex's kernels: the same implementation. Without a GPU
  // (or a CUDA build) the rerun fails, and is recorded and linked all the same (exit 1); with one it passes.
  const std::string original = run_of("kindex_paged_decode");
  ASSERT_FALSE(original.empty());
  Outcome o = dir.run("rerun " + original + kSmall + " --json", "", true);
  EXPECT_TRUE(o.code == 0 || o.code == 1) << o.output;
  const nlohmann::json j = nlohmann::json::parse(o.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.output;
  EXPECT_EQ(j["plan"]["implementation"], "kindex");
  EXPECT_EQ(j["plan"]["problem"], "gqa_paged_decode_h32_kv4_d128_ps1");
  EXPECT_EQ(j["plan"]["source"], "flashinfer-bench");
  EXPECT_TRUE(j["plan"]["sameImplementation"].get<bool>());
  EXPECT_EQ(j["passed"].get<bool>(), o.code == 0);
  EXPECT_EQ(j["original"]["id"], original);
  EXPECT_EQ(j["rerun"]["rerunOf"]["id"], original);  // the rerun's run view, as GET /api/runs/ID gives it
  const nlohmann::json after = show(original);
  ASSERT_EQ(after["reruns"].size(), 1u) << after.dump(2);
  EXPECT_TRUE(after["reruns"][0]["sameImplementation"].get<bool>());
  EXPECT_EQ(after["reruns"][0]["rerun"]["id"], j["rerun"]["run"]["id"]);
  EXPECT_EQ(after["reruns"][0]["rerun"]["status"] == "passed", o.code == 0);
}

TEST_F(RerunCli, AnExportOfTheStoreImportsWithTheLink) {
  const std::string original = run_of("kindex_paged_decode");
  ASSERT_EQ(dir.run("rerun " + original + kSmall + " --impl cpu-reference").code, 0);
  ASSERT_EQ(show(original)["reruns"].size(), 1u);
  Outcome exported = dir.run("export --store s.db all.jsonl");
  ASSERT_EQ(exported.code, 0) << exported.output;
  Outcome imported = dir.run("import --store copy.db all.jsonl");
  ASSERT_EQ(imported.code, 0) << imported.output;
  const nlohmann::json copy = show(original, "copy.db");
  ASSERT_EQ(copy["reruns"].size(), 1u) << copy.dump(2);
  EXPECT_EQ(copy["reruns"][0], show(original)["reruns"][0]);
}

TEST_F(RerunCli, ClearErrorsForAMissingRunAnUnmappableImplementationAndAProblemTheRunnerLacks) {
  Outcome missing = dir.run("rerun 0123456789abcdef --store s.db --out ''");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find("run = 0123456789abcdef: no such run in this store"), std::string::npos) << missing.output;

  // A solution kindex cannot obtain here (a Triton kernel by name only), unless --impl names one.
  std::string lines;
  {
    std::ifstream in(kindex::test::data_dir() + "/harness-traces/h200_fib_ps1.jsonl");
    std::getline(in, lines);
  }
  const std::string from = "kindex_paged_decode_gqa_paged_decode_h32_kv4_d128_ps1";
  lines.replace(lines.find("\"solution\":\"" + from), from.size() + 12, "\"solution\":\"someones_triton_decode");
  { std::ofstream((dir.path / "other.jsonl").string()) << lines << "\n"; }
  import_trace((dir.path / "other.jsonl").string());
  const std::string other = run_of("someones_triton_decode");
  ASSERT_FALSE(other.empty());
  Outcome unmappable = dir.run("rerun " + other + " --store s.db --out ''");
  EXPECT_EQ(unmappable.code, 2) << unmappable.output;
  EXPECT_NE(unmappable.output.find("implementation = someones_triton_decode: is not one kindex can obtain here"),
            std::string::npos)
      << unmappable.output;
  EXPECT_NE(unmappable.output.find("--impl solution:FILE"), std::string::npos) << unmappable.output;
  EXPECT_TRUE(show(other)["reruns"].empty());

  // KernelIndex's example run (an RMSNorm) is no problem the runner has.
  std::string examples;
  for (const char* f : {"operation-spec", "workload-case", "implementation-revision", "benchmark-protocol",
                        "execution-environment", "software-project", "benchmark-run"})
    examples += " " + kindex::test::data_dir() + "/kernelindex/examples/" + f + ".yaml";
  ASSERT_EQ(dir.run("import --store s.db" + examples).code, 0);
  auto s = kindex::store::Store::open((dir.path / "s.db").string());
  auto rows = s->db().query("SELECT r.id, o.name FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id JOIN "
                            "operations o ON o.id = w.operation_id WHERE o.name NOT LIKE 'gqa%'");
  ASSERT_EQ(rows.size(), 1u);
  Outcome foreign = dir.run("rerun " + rows[0].text(0) + " --store s.db --out '' --impl cpu-reference");
  EXPECT_EQ(foreign.code, 2) << foreign.output;
  EXPECT_NE(foreign.output.find("operation = " + rows[0].text(1) + ": is not a problem kindex's runner can run"),
            std::string::npos)
      << foreign.output;
  // Nothing was recorded by the refused reruns.
  EXPECT_EQ(s->db().query("SELECT COUNT(*) FROM run_reruns")[0].integer(0), 0);
}

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// `kindex keygen`, `kindex rerun --sign` of a run of the CPU reference (a real implementation, rerun here on the CPU
// path), `kindex attest verify` of what it wrote, of that file altered, in a store without the runs and with an
// unknown key; the attestation travels by import and shows on the run page and under the API.
TEST_F(RerunCli, SignedRerunIsVerifiedAndEveryAlterationOrUnknownIsReported) {
  Outcome keygen = dir.run("keygen me.key");
  ASSERT_EQ(keygen.code, 0) << keygen.output;
  std::smatch id;
  ASSERT_TRUE(std::regex_search(keygen.output, id, std::regex("key (ed25519:[0-9a-f]{16})"))) << keygen.output;
  const std::string key_id = id[1];
  EXPECT_EQ(std::filesystem::status(dir.path / "me.key").permissions() & std::filesystem::perms::group_all,
            std::filesystem::perms::none);
  Outcome again = dir.run("keygen me.key");
  EXPECT_EQ(again.code, 2) << again.output;
  EXPECT_NE(again.output.find("file = me.key: already exists"), std::string::npos) << again.output;

  Outcome bench = dir.run("bench --problem gqa_paged_decode_h32_kv4_d128_ps1 --workloads 0 --impl cpu-reference "
                          "--reference cpu-reference --trials 1 --iterations 2 --warmup 0 --store s.db --out ''");
  ASSERT_EQ(bench.code, 0) << bench.output;
  auto s = kindex::store::Store::open((dir.path / "s.db").string());
  const auto own = s->db().query("SELECT id FROM benchmark_runs WHERE origin = 'kindex'");
  ASSERT_EQ(own.size(), 1u);
  const std::string run = own[0].text(0);

  Outcome bad_key = dir.run("rerun " + run + kSmall + " --sign me.key.pub");
  EXPECT_EQ(bad_key.code, 2) << bad_key.output;
  EXPECT_NE(bad_key.output.find("me.key.pub: key = -----BEGIN PUBLIC KEY-----: not a PEM private key"),
            std::string::npos)
      << bad_key.output;
  EXPECT_EQ(s->db().query("SELECT COUNT(*) FROM run_reruns")[0].integer(0), 0);  // refused before measuring

  Outcome rerun = dir.run("rerun " + run + kSmall + " --sign me.key --attestation a.json");
  ASSERT_EQ(rerun.code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("attestation a.json: replicated, signed by " + key_id + " on "), std::string::npos)
      << rerun.output;
  const std::string line = read_text(dir.path / "a.json");
  ASSERT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;

  Outcome verified = dir.run("attest verify a.json --store s.db");
  EXPECT_EQ(verified.code, 0) << verified.output;
  EXPECT_NE(verified.output.find("a.json:1: verified: replicated by " + key_id + " on "), std::string::npos)
      << verified.output;

  // Each part altered: the verdict, the rerun's digest (a replay onto another run), the signer's key id.
  const nlohmann::json doc = nlohmann::json::parse(line);
  const std::vector<std::pair<std::string, nlohmann::json::json_pointer>> alterations = {
      {"not_replicated", nlohmann::json::json_pointer("/statement/verdict")},
      {"sha256:" + std::string(64, '0'), nlohmann::json::json_pointer("/statement/originalRunDigest")},
      {"ed25519:0000000000000000", nlohmann::json::json_pointer("/statement/keyId")}};
  for (const auto& [value, where] : alterations) {
    nlohmann::json altered = doc;
    altered[where] = value;
    { std::ofstream((dir.path / "t.json").string()) << altered.dump() << "\n"; }
    Outcome o = dir.run("attest verify t.json --store s.db");
    EXPECT_EQ(o.code, 1) << where.to_string() << ": " << o.output;
    EXPECT_NE(o.output.find("t.json:1: NOT VERIFIED (bad_signature)"), std::string::npos) << o.output;
    // An import refuses it, and the store is as it was.
    Outcome refused = dir.run("import --store s.db t.json");
    EXPECT_EQ(refused.code, 2) << refused.output;
    EXPECT_NE(refused.output.find("t.json:1: signature"), std::string::npos) << refused.output;
    EXPECT_EQ(s->db().query("SELECT COUNT(*) FROM run_attestations")[0].integer(0), 1);
  }

  // Another store: the attestation imports, but its runs are not there and its signer is not trusted there.
  Outcome imported = dir.run("import --store copy.db a.json");
  ASSERT_EQ(imported.code, 0) << imported.output;
  Outcome elsewhere = dir.run("attest verify a.json --store copy.db");
  EXPECT_EQ(elsewhere.code, 1) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("NOT VERIFIED (rerun_missing)"), std::string::npos) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("the key " + key_id + " is not one this store trusts"), std::string::npos)
      << elsewhere.output;
  // A key trusted for the check, and a store that trusts another key only.
  ASSERT_EQ(dir.run("keygen other.key").code, 0);
  ASSERT_EQ(dir.run("import --store s2.db a.json").code, 0);
  ASSERT_EQ(dir.run("export --store s.db runs.jsonl").code, 0);
  ASSERT_EQ(dir.run("import --store s2.db runs.jsonl").code, 0);
  ASSERT_EQ(dir.run("attest trust other.key.pub --store s2.db").code, 0);
  {
    // The export alone carries the signed attestation: a fresh store importing it re-verifies it, and shows it
    // verified once it trusts the signer.
    Outcome only_export = dir.run("import --store s3.db runs.jsonl");
    ASSERT_EQ(only_export.code, 0) << only_export.output;
    EXPECT_NE(only_export.output.find("kindex_run_attestations 1"), std::string::npos) << only_export.output;
    ASSERT_EQ(dir.run("attest trust me.key.pub --store s3.db").code, 0);
    auto s3 = kindex::store::Store::open((dir.path / "s3.db").string());
    const nlohmann::json there = kindex::store::run_view(*s3, run);
    ASSERT_EQ(there["attestations"].size(), 1u) << there.dump(2);
    EXPECT_EQ(there["attestations"][0]["status"], "verified") << there["attestations"].dump(2);
    EXPECT_EQ(dir.run("attest verify a.json --store s3.db").code, 0);
  }
  Outcome stranger = dir.run("attest verify a.json --store s2.db");
  EXPECT_EQ(stranger.code, 1) << stranger.output;
  EXPECT_NE(stranger.output.find("NOT VERIFIED (unknown_key)"), std::string::npos) << stranger.output;
  EXPECT_EQ(dir.run("attest verify a.json --store s2.db --trust me.key.pub").code, 0);
  {
    // Its page there says so, and never "replicated by".
    auto s2 = kindex::store::Store::open((dir.path / "s2.db").string());
    const std::string there = kindex::web::run_page(kindex::store::run_view(*s2, run));
    EXPECT_NE(there.find("data-status=\"unknown_key\""), std::string::npos) << there;
    EXPECT_NE(there.find(": not verified (unknown_key: the key " + key_id), std::string::npos) << there;
    EXPECT_EQ(there.find("replicated by"), std::string::npos) << there;
  }

  // The run page: the rerun table, "replicated by <key id> on <where>" linking the document, which the API serves.
  const nlohmann::json view = kindex::store::run_view(*s, run);
  ASSERT_EQ(view["attestations"].size(), 1u) << view.dump(2);
  EXPECT_EQ(view["attestations"][0]["status"], "verified");
  const std::string href = view["attestations"][0]["href"];
  const std::string page = kindex::web::run_page(view);
  EXPECT_NE(page.find("<table id=\"rerun-table\">"), std::string::npos) << page;
  EXPECT_NE(page.find("replicated by <a class=\"attestation\" href=\"" + href + "\">" + key_id + "</a> on "),
            std::string::npos)
      << page;
  EXPECT_EQ(view["reruns"].size(), 1u);
  EXPECT_TRUE(view["reruns"][0]["ratioToOriginal"].is_number());
  ServeProcess serve(dir.path, "--store s.db --port 0");
  ASSERT_GT(serve.port(), 0) << serve.output();
  httplib::Client c("127.0.0.1", serve.port());
  auto served = c.Get(href.c_str());
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200);
  EXPECT_EQ(served->body, line);
  auto missing = c.Get("/api/attestations/sha256:0000");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}
