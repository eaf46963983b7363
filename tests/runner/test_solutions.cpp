// Solutions as implementations (src/runner/execute/solution.hpp): the two harnesses' loaders, and the Python worker's
// protocol on the CPU path with tiny pure-Python solutions of the first (7-token) workload of
// gqa_paged_decode_h32_kv4_d128_ps1: passed, wrong, crashed, raised, hung, wrong output shape, value-returning,
// a solution of another definition, a peer whose package is missing. Needs python3 (CI has it; no torch).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "runner/execute/implementation.hpp"
#include "runner/runner.hpp"
#include "runner/record/sinks.hpp"
#include "runner/execute/solution.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::runner {

namespace {

using nlohmann::json;

// A pure-Python paged decode on the worker's host tensors (values() / assign()): run(<inputs>, output, lse).
const char* kDecodeSource = R"py(import math

def decode(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch, heads, dim = q.shape
    _, page_size, kv_heads, _ = k_cache.shape
    qv, kv, vv = q.values(), k_cache.values(), v_cache.values()
    indptr, indices = kv_indptr.values(), kv_indices.values()
    group = heads // kv_heads
    out, lses = [0.0] * (batch * heads * dim), [float("-inf")] * (batch * heads)
    for b in range(batch):
        rows = [p * page_size * kv_heads * dim for p in indices[indptr[b]:indptr[b + 1]]]
        for h in range(heads):
            qh = qv[(b * heads + h) * dim:(b * heads + h + 1) * dim]
            at = [r + (h // group) * dim for r in rows]
            scores = [sm_scale * sum(x * y for x, y in zip(qh, kv[r:r + dim])) for r in at]
            if not scores:
                continue
            m = max(scores)
            w = [math.exp(s - m) for s in scores]
            total = sum(w)
            lses[b * heads + h] = (m + math.log(total)) / math.log(2.0)
            for d in range(dim):
                out[(b * heads + h) * dim + d] = sum(wi * vv[r + d] for wi, r in zip(w, at)) / total
    return out, lses


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, output, lse):
    print("a solution's own print must not break the worker's replies")
    out, lses = decode(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale)
    output.assign(out)
    lse.assign(lses)
)py";

json fib_solution(const std::string& name, const std::string& extra_source, bool dps = true,
                  const std::string& definition = "gqa_paged_decode_h32_kv4_d128_ps1") {
  return test::python_solution(name, definition, "cpu", std::string(kDecodeSource) + extra_source, dps);
}

using test::write_solution;

struct Fixture {
  catalog::Problem problem = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  std::vector<WorkItem> items() const { return {{&problem.definition, &problem.workloads.at(0)}}; }
};

// The tests' solutions use the worker's host tensors, which it hands over where torch is not importable: the
// Python runs with -S (no site-packages), whatever this machine has installed.
struct PythonWithoutSitePackages {
  PythonWithoutSitePackages() {
    const auto path = test::scratch_dir("python-S") / "python3-S";
    std::ofstream(path) << "#!/bin/sh\nexec python3 -S \"$@\"\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    ::setenv("KINDEX_PYTHON", path.c_str(), 1);
  }
  ~PythonWithoutSitePackages() { ::unsetenv("KINDEX_PYTHON"); }
};

BenchOptions options(std::vector<std::string> impls, double timeout_s = 60) {
  BenchOptions o = test::quick_options(std::move(impls), 2);
  o.timeout_s = timeout_s;
  return o;
}

void expect_error(const std::function<void()>& f, const std::string& field, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Solutions, LoadersReadBothHarnessesSchemas) {
  SolutionFile fib = parse_flashinfer_bench_solution(fib_solution("fib", ""), "fib.json");
  EXPECT_EQ(fib.harness, "flashinfer-bench");
  EXPECT_EQ(fib.definition, "gqa_paged_decode_h32_kv4_d128_ps1");
  EXPECT_EQ(fib.languages, std::vector<std::string>{"python"});
  EXPECT_EQ(fib.entry_file, "main.py");
  EXPECT_EQ(fib.entry_function, "run");
  EXPECT_TRUE(fib.destination_passing_style);
  ASSERT_EQ(fib.sources.size(), 1u);

  json sol = {{"name", "sol"},
              {"definition", "003_grouped_query_attention_with_rope_backward"},
              {"author", "someone"},
              {"spec", {{"languages", {"pytorch", "triton"}}, {"target_hardware", {"LOCAL"}},
                        {"entry_point", "pkg/main.py::backward"}, {"destination_passing_style", false}}},
              {"sources", {{{"path", "pkg/main.py"}, {"content", "def backward(*a):\n    return a\n"}},
                           {{"path", "pkg/util.py"}, {"content", "X = 1\n"}}}}};
  SolutionFile s = parse_sol_execbench_solution(sol, "sol.json");
  EXPECT_EQ(s.harness, "sol-execbench");
  EXPECT_EQ(s.languages, (std::vector<std::string>{"pytorch", "triton"}));
  EXPECT_EQ(s.entry_file, "pkg/main.py");
  EXPECT_EQ(s.entry_function, "backward");
  EXPECT_FALSE(s.destination_passing_style);
  EXPECT_EQ(s.sources.size(), 2u);

  // read_solution_file tells the two apart by spec.language / spec.languages.
  EXPECT_EQ(read_solution_file(write_solution(sol, "sol-read")).harness, "sol-execbench");
  EXPECT_EQ(read_solution_file(write_solution(fib_solution("fib_read", ""), "fib-read")).harness, "flashinfer-bench");
}

TEST(Solutions, BadSolutionsAreRefusedNamingTheField) {
  auto fib = [](const std::function<void(json&)>& edit) {
    json doc = fib_solution("bad", "");
    edit(doc);
    return [doc] { parse_flashinfer_bench_solution(doc, "bad.json"); };
  };
  expect_error(fib([](json& d) { d.erase("definition"); }), "definition", "missing");
  expect_error(fib([](json& d) { d["spec"]["entry_point"] = "main.py:run"; }), "spec.entry_point", "main.py:run");
  expect_error(fib([](json& d) { d["spec"]["entry_point"] = "other.py::run"; }), "spec.entry_point",
               "not among the sources");
  expect_error(fib([](json& d) { d["spec"]["language"] = "cuda"; }), "spec.language", "harness's own builder");
  expect_error(fib([](json& d) { d["spec"]["language"] = "fortran"; }), "spec.language", "fortran");
  expect_error(fib([](json& d) { d["sources"][0]["path"] = "../main.py"; }), "sources[0].path", "without \"..\"");
  expect_error(fib([](json& d) { d["sources"] = json::array(); }), "sources", "at least one");
  expect_error(fib([](json& d) { d["sources"].push_back(d["sources"][0]); }), "sources[1].path", "twice");
  expect_error(fib([](json& d) { d["spec"]["destination_passing_style"] = "yes"; }),
               "spec.destination_passing_style", "true or false");
  expect_error(fib([](json& d) { d["sources"][0]["content"] = 5; }), "content", "must be a string");
  json sol = {{"name", "s"}, {"definition", "d"}, {"spec", {{"languages", {"cuda_cpp"}}, {"entry_point", "k.cu::run"}}},
              {"sources", {{{"path", "k.cu"}, {"content", "x"}}}}};
  expect_error([&] { parse_sol_execbench_solution(sol, "sol.json"); }, "spec.entry_point", "Python source");
  sol["spec"]["entry_point"] = "main.py::run";
  sol["sources"][0]["path"] = "main.py";
  expect_error([&] { parse_sol_execbench_solution(sol, "sol.json"); }, "spec.languages", "cuda_cpp");

  // Through --impl: a missing file, and a JSON file that is no solution.
  expect_error([] { check_implementation_spec("solution:/no/such/solution.json"); }, "--impl", "no such file");
  expect_error([] { check_implementation_spec("solution:"); }, "--impl", "needs a solution file");
  auto dir = test::scratch_dir("notsolution");
  std::ofstream(dir / "x.json") << R"({"name": "x"})";
  expect_error([&] { check_implementation_spec("solution:" + (dir / "x.json").string()); }, "spec", "spec object");
  for (const auto& peer : peer_names()) EXPECT_NO_THROW(check_implementation_spec(peer));
}

// The files python/kindex/solutions.py writes for kindex's own kernels load with the same loaders.
TEST(Solutions, KindexOwnExportsLoad) {
  auto dir = test::scratch_dir("exports");
  const std::string python = "cd " + test::source_dir() + " && PYTHONPATH=" + test::source_dir() + "/python python3";
  ASSERT_EQ(std::system((python + " -m kindex.solutions flashinfer-bench --version test --out " + dir.string() +
                         "/fib > /dev/null").c_str()),
            0);
  ASSERT_EQ(std::system((python + " -m kindex.solutions sol-execbench --version test --out " + dir.string() +
                         "/sol > /dev/null").c_str()),
            0);
  const std::string name = "gqa_paged_decode_h32_kv4_d128_ps1";
  SolutionFile fib = read_solution_file(
      (dir / "fib/solutions/gqa_paged" / name / ("kindex_paged_decode_" + name + ".json")).string());
  EXPECT_EQ(fib.harness, "flashinfer-bench");
  EXPECT_EQ(fib.definition, name);
  EXPECT_TRUE(fib.destination_passing_style);
  SolutionFile sol = read_solution_file((dir / "sol/solution.json").string());
  EXPECT_EQ(sol.harness, "sol-execbench");
  EXPECT_EQ(sol.definition, "003_grouped_query_attention_with_rope_backward");
  EXPECT_FALSE(sol.destination_passing_style);
  EXPECT_EQ(sol.languages, std::vector<std::string>{"pytorch"});
}

// The worker protocol end to end on the CPU path: the same comparator and records as any implementation.
TEST(Solutions, APythonSolutionRunsAndEachFailureGetsItsStatus) {
  PythonWithoutSitePackages python;
  Fixture f;
  const std::string ok = write_solution(fib_solution("pure_python_decode", ""), "ok");
  const std::string wrong = write_solution(
      fib_solution("wrong",
                   "\n_run = run\ndef run(*a):\n    _run(*a)\n    a[-2].assign([x + 0.5 for x in a[-2].values()])\n"),
      "wrong");
  const std::string crash =
      write_solution(fib_solution("crash", "\nimport os\ndef run(*a):\n    os.abort()\n"), "crash");
  const std::string raise =
      write_solution(fib_solution("raise", "\ndef run(*a):\n    raise ValueError('synthetic failure')\n"), "raise");
  // Value-returning, one output of the wrong shape.
  const std::string shape = write_solution(
      fib_solution("shape", "\ndef run(q, *a):\n    return type(q)('bfloat16', [1]), type(q)('float32', [1, 32])\n",
                   false),
      "shape");
  // Value-returning and right: the outputs built from the worker's own host tensor type.
  const std::string returns = write_solution(
      fib_solution("returns",
                   "\ndef run(q, k, v, indptr, indices, scale):\n"
                   "    out, lses = decode(q, k, v, indptr, indices, scale)\n"
                   "    o, l = type(q)('bfloat16', q.shape), type(q)('float32', q.shape[:2])\n"
                   "    o.assign(out)\n    l.assign(lses)\n    return o, l\n",
                   false),
      "returns");
  const std::string other =
      write_solution(fib_solution("other", "", true, "gqa_paged_decode_h24_kv4_d128_ps64"), "other");
  // A plan step (as kindex's peers have): called before the round's calls, its host time recorded apart; run()
  // refuses to run before it.
  const std::string planned = write_solution(
      fib_solution("planned", "\n_plan = []\n_run = run\ndef plan(*a):\n    _plan.append(a[-1].shape)\n"
                              "def run(*a):\n    assert _plan, 'run before plan'\n    _run(*a)\n"),
      "planned");
  BenchReport report = run_bench(f.items(), options({"solution:" + crash, "solution:" + ok, "solution:" + wrong,
                                                     "solution:" + raise, "solution:" + shape, "solution:" + returns,
                                                     "solution:" + other, "solution:" + planned}));
  ASSERT_EQ(report.results.size(), 8u);
  const auto& crashed = report.results[0];
  EXPECT_EQ(crashed.status, RunStatus::runtime_error);
  EXPECT_NE(crashed.message.find("Python process died (signal 6"), std::string::npos) << crashed.message;

  const auto& passed = report.results[1];
  EXPECT_EQ(passed.status, RunStatus::passed) << passed.message;
  EXPECT_EQ(passed.check, "reference");
  EXPECT_EQ(passed.reference_implementation, "cpu-reference");
  EXPECT_EQ(passed.comparator, "flashinfer_bench_eval");
  EXPECT_EQ(passed.timing.timer, "wall_clock");
  ASSERT_EQ(passed.timing.trials_ns.size(), 1u);
  EXPECT_EQ(passed.timing.trials_ns[0].size(), 2u);
  EXPECT_GT(passed.latency_ns(), 0);
  EXPECT_EQ(passed.implementation_info.interface, "flashinfer_bench_solution");
  EXPECT_EQ(passed.implementation_info.language, "python");
  EXPECT_EQ(passed.implementation_info.version, "pure_python_decode");
  EXPECT_EQ(passed.implementation_info.path, ok);
  EXPECT_FALSE(passed.implementation_info.on_device);
  // Its trace line names the solution as the harness's own trace would.
  EXPECT_EQ(trace_line(passed, f.problem.workloads.at(0), report.environment)["solution"], "pure_python_decode");

  const auto& incorrect = report.results[2];
  EXPECT_EQ(incorrect.status, RunStatus::incorrect_numerical) << incorrect.message;
  EXPECT_GE(incorrect.max_abs_error, 0.4);
  EXPECT_TRUE(incorrect.timing.trials_ns.empty());

  EXPECT_EQ(report.results[3].status, RunStatus::runtime_error);
  EXPECT_NE(report.results[3].message.find("ValueError: synthetic failure (at main.py:"), std::string::npos)
      << report.results[3].message;
  EXPECT_EQ(report.results[4].status, RunStatus::runtime_error);
  EXPECT_NE(report.results[4].message.find("output output is bfloat16 [1]; expected bfloat16 [1, 32, 128]"),
            std::string::npos)
      << report.results[4].message;
  EXPECT_EQ(report.results[5].status, RunStatus::passed) << report.results[5].message;
  EXPECT_EQ(report.results[6].status, RunStatus::runtime_error);
  EXPECT_NE(report.results[6].message.find("solves definition gqa_paged_decode_h24_kv4_d128_ps64"),
            std::string::npos)
      << report.results[6].message;
  EXPECT_FALSE(passed.plan_host_s.has_value());
  EXPECT_EQ(report.results[7].status, RunStatus::passed) << report.results[7].message;
  ASSERT_TRUE(report.results[7].plan_host_s.has_value());
  EXPECT_GE(*report.results[7].plan_host_s, 0.0);
}

// The speedup's denominator (the timing reference) is timed in the first trial only, and once per workload: the
// workload's next runs get the first run's samples; the implementation is timed in every trial, and the speedup
// is the ratio of the two headline latencies.
TEST(Solutions, TheTimingReferenceIsTimedOncePerWorkload) {
  PythonWithoutSitePackages python;
  Fixture f;
  const std::string first = write_solution(fib_solution("pure_python_decode", ""), "first");
  const std::string second = write_solution(fib_solution("pure_python_decode_again", ""), "second");
  BenchOptions o = options({"solution:" + first, "solution:" + second});
  o.trials = 3;
  o.timing_trials = 3;
  BenchReport report = run_bench(f.items(), o);
  ASSERT_EQ(report.results.size(), 2u);
  for (const auto& r : report.results) {
    ASSERT_EQ(r.status, RunStatus::passed) << r.message;
    EXPECT_EQ(r.rounds_run, 3);
    EXPECT_EQ(r.timing.trials_ns.size(), 3u);
    ASSERT_EQ(r.reference_timing.trials_ns.size(), 1u);
    ASSERT_TRUE(r.timing.summary && r.reference_timing.summary && r.speedup);
    EXPECT_DOUBLE_EQ(*r.speedup, r.reference_timing.summary->latency / r.timing.summary->latency);
  }
  EXPECT_EQ(report.results[1].reference_timing.trials_ns, report.results[0].reference_timing.trials_ns);
  EXPECT_EQ(report.results[0].message.find("timed once per workload"), std::string::npos);
  EXPECT_NE(report.results[1].message.find("timed once per workload"), std::string::npos) << report.results[1].message;
}

TEST(Solutions, AHungSolutionIsATimeoutAndTheNextRunGoesOn) {
  PythonWithoutSitePackages python;
  Fixture f;
  const std::string hang =
      write_solution(fib_solution("hang", "\nimport time\ndef run(*a):\n    time.sleep(600)\n"), "hang");
  const std::string ok = write_solution(fib_solution("after_hang", ""), "after-hang");
  BenchReport report = run_bench(f.items(), options({"solution:" + hang, "solution:" + ok}, 3));
  ASSERT_EQ(report.results.size(), 2u);
  EXPECT_EQ(report.results[0].status, RunStatus::timeout);
  EXPECT_EQ(report.results[1].status, RunStatus::passed) << report.results[1].message;
}

// A peer whose package is missing is reported as not available and not run; a missing Python is a run's error.
TEST(Solutions, MissingPeersAreNotAvailableRatherThanFailures) {
  Fixture f;
  PythonWithoutSitePackages python;  // where flashinfer is not installed, whatever this machine has
  BenchOptions o = options({"cpu-reference"});
  o.reference = "cpu-reference";
  o.peers = {"flashinfer"};
  // Two workloads, so the peer's skipped jobs sit between the runs that remain.
  std::vector<WorkItem> two = {{&f.problem.definition, &f.problem.workloads.at(0)},
                               {&f.problem.definition, &f.problem.workloads.at(2)}};
  BenchReport report = run_bench(two, o);
  ASSERT_EQ(report.results.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(report.results[i].implementation, "cpu-reference");
    EXPECT_EQ(report.results[i].workload_uuid, two[i].workload->uuid);
    EXPECT_EQ(report.results[i].status, RunStatus::passed) << report.results[i].message;
  }
  ASSERT_EQ(report.not_available.count("flashinfer"), 1u);
  EXPECT_NE(report.not_available["flashinfer"].find("not installed"), std::string::npos);
  EXPECT_NE(results_table(report).find("peer flashinfer not available: not installed"), std::string::npos)
      << results_table(report);

  // Named with --impl, the same: reported, not run, not a failure.
  BenchReport named = run_bench(f.items(), options({"flashinfer"}));
  EXPECT_TRUE(named.results.empty());
  EXPECT_EQ(named.not_available.count("flashinfer"), 1u);
  EXPECT_FALSE(named.any_correctness_failure());

  const std::string ok = write_solution(fib_solution("no_python", ""), "no-python");
  ::setenv("KINDEX_PYTHON", "/no/such/python3", 1);
  BenchReport none = run_bench(f.items(), options({"solution:" + ok}));
  ::unsetenv("KINDEX_PYTHON");
  ASSERT_EQ(none.results.size(), 1u);
  EXPECT_EQ(none.results[0].status, RunStatus::runtime_error);
  EXPECT_NE(none.results[0].message.find("could not start /no/such/python3"), std::string::npos)
      << none.results[0].message;
}

// A solution's set-up (its plan step on every workload it will run) happens in a worker of its own before its runs,
// while the other implementations' runs go on; its runs then find it done in the same Python process, and the
// report gives its wall time apart from every run's.
TEST(Solutions, ASolutionIsPreparedInItsOwnWorkerWhileTheOthersRun) {
  PythonWithoutSitePackages python;
  Fixture f;
  // plan: 1.5 s on each shape it has not seen; run refuses a shape whose plan step did not come first.
  const std::string slow = write_solution(
      fib_solution("slow_set_up", "\nimport time\n_seen = set()\n_run = run\n"
                                  "def _key(a):\n"
                                  "    return tuple(tuple(x.shape) if hasattr(x, 'shape') else x for x in a)\n"
                                  "def plan(*a):\n    if _key(a) not in _seen:\n        time.sleep(1.5)\n"
                                  "        _seen.add(_key(a))\n"
                                  "def run(*a):\n    assert _key(a) in _seen, 'run before plan'\n    _run(*a)\n"),
      "slow-set-up");
  const std::vector<WorkItem> two = {{&f.problem.definition, &f.problem.workloads.at(0)},
                                     {&f.problem.definition, &f.problem.workloads.at(2)}};
  std::vector<std::string> finished;
  BenchReport report = run_bench(two, options({"solution:" + slow, "cpu-reference"}),
                                 [&](const RunResult& r, const Environment&) { finished.push_back(r.implementation); });
  // The CPU reference's runs went first (the solution was being prepared); the report keeps the jobs' order.
  ASSERT_EQ(finished.size(), 4u);
  EXPECT_EQ(finished[0], "cpu-reference");
  EXPECT_EQ(finished[1], "cpu-reference");
  ASSERT_EQ(report.results.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(report.results[i].implementation, i % 2 ? "cpu-reference" : "solution:" + slow);
    EXPECT_EQ(report.results[i].workload_uuid, two[i / 2].workload->uuid);
    EXPECT_EQ(report.results[i].status, RunStatus::passed) << report.results[i].message;
  }
  ASSERT_EQ(report.set_up.count("solution:" + slow), 1u);
  const SetUpRecord& s = report.set_up.at("solution:" + slow);
  EXPECT_EQ(s.status, "prepared") << s.message;
  EXPECT_EQ(s.workloads, 2);
  EXPECT_EQ(s.planned, 2);
  EXPECT_GE(s.wall_s, 3.0);
  // Each run's own plan step found its shape done (a fresh process would have slept 1.5 s).
  for (const auto& r : {report.results[0], report.results[2]}) {
    ASSERT_TRUE(r.plan_host_s.has_value());
    EXPECT_LT(*r.plan_host_s, 1.0);
  }
  EXPECT_EQ(report.set_up.count("cpu-reference"), 0u);  // runs in the worker itself: nothing to prepare
  const nlohmann::json j = report.to_json();
  EXPECT_EQ(j["set_up"]["solution:" + slow]["workloads"], 2);
  EXPECT_NE(results_table(report).find("set-up before the runs: solution:" + slow), std::string::npos)
      << results_table(report);
}

// A set-up that fails is reported and the solution's runs still run; one that hangs is ended at the per-workload
// timeout and its runs are not run (reported as not available); a peer not installed is not prepared at all.
TEST(Solutions, AFailedOrHungSetUpIsReportedAndTheBenchGoesOn) {
  PythonWithoutSitePackages python;
  Fixture f;
  const std::string fails = write_solution(
      fib_solution("set_up_fails", "\n_plans = []\ndef plan(*a):\n    _plans.append(1)\n"
                                   "    if len(_plans) == 1:\n"
                                   "        raise RuntimeError('synthetic set-up failure')\n"),
      "set-up-fails");
  const std::string hangs = write_solution(
      fib_solution("set_up_hangs", "\nimport time\n_plans = []\ndef plan(*a):\n    _plans.append(1)\n"
                                   "    if len(_plans) == 1:\n        time.sleep(600)\n"),
      "set-up-hangs");
  BenchOptions o = options({"solution:" + fails, "solution:" + hangs, "cpu-reference"}, 3);
  o.peers = {"flashinfer"};  // not installed where the Python runs with -S
  BenchReport report = run_bench(f.items(), o);
  ASSERT_EQ(report.results.size(), 2u);
  EXPECT_EQ(report.results[0].implementation, "solution:" + fails);
  EXPECT_EQ(report.results[0].status, RunStatus::passed) << report.results[0].message;
  EXPECT_EQ(report.results[1].implementation, "cpu-reference");
  EXPECT_EQ(report.results[1].status, RunStatus::passed) << report.results[1].message;

  const SetUpRecord& failed = report.set_up.at("solution:" + fails);
  EXPECT_EQ(failed.status, "failed");
  EXPECT_NE(failed.message.find("RuntimeError: synthetic set-up failure"), std::string::npos) << failed.message;
  const SetUpRecord& hung = report.set_up.at("solution:" + hangs);
  EXPECT_EQ(hung.status, "timeout");
  EXPECT_GE(hung.wall_s, 3.0);
  ASSERT_EQ(report.not_available.count("solution:" + hangs), 1u);
  EXPECT_NE(report.not_available["solution:" + hangs].find("set-up exceeded the per-workload timeout of 3 s"),
            std::string::npos)
      << report.not_available["solution:" + hangs];
  EXPECT_EQ(report.set_up.count("flashinfer"), 0u);
  EXPECT_NE(report.not_available["flashinfer"].find("not installed"), std::string::npos);
  const std::string table = results_table(report);
  EXPECT_NE(table.find("solution:" + fails + " failed"), std::string::npos) << table;
}

// Where the first workload's set-up missed the compiler's cache (here a stand-in for Inductor's counters), helper
// processes compile later workloads meanwhile (each writes a marker where a real one fills the on-disk cache; a plan
// step of 0.7 s on each new shape gives them time to begin), and are ended with the lane; where it hit, none start.
TEST(Solutions, AColdCompileCacheStartsWarmUpHelpers) {
  PythonWithoutSitePackages python;
  Fixture f;
  const auto markers = test::scratch_dir("warm-up-markers");
  auto solution = [&](const std::string& name, const std::string& counter) {
    return write_solution(
        fib_solution(name, "\nimport collections, os, sys, time, types\n"
                           "_counters = {'inductor': collections.Counter()}\n"
                           "sys.modules['torch._dynamo.utils'] = types.SimpleNamespace(counters=_counters)\n"
                           "_seen = set()\n"
                           "def plan(*a):\n    if a[1].shape in _seen:\n        return\n    _seen.add(a[1].shape)\n"
                           "    _counters['inductor']['" + counter + "'] += 1\n"
                           "    open(os.path.join('" + markers.string() + "', '" + name +
                           "_%d_%d' % (os.getpid(), a[1].shape[0])), 'w').close()\n"
                           "    time.sleep(0.7)\n"),
        name);
  };
  const std::string cold = solution("cold_cache", "fxgraph_cache_miss");
  const std::string warm = solution("warm_cache", "fxgraph_cache_hit");
  std::vector<WorkItem> four;
  for (size_t w : {0, 2, 4, 6}) four.push_back({&f.problem.definition, &f.problem.workloads.at(w)});
  BenchOptions o = options({"solution:" + cold, "solution:" + warm});
  o.set_up_processes = 3;
  BenchReport report = run_bench(four, o);
  ASSERT_EQ(report.results.size(), 8u);
  for (const auto& r : report.results) EXPECT_EQ(r.status, RunStatus::passed) << r.message;

  const SetUpRecord& c = report.set_up.at("solution:" + cold);
  EXPECT_EQ(c.status, "prepared");
  EXPECT_EQ(c.workloads, 4);
  EXPECT_EQ(c.compile_cache_misses, 4);  // the lane's own: it compiles every workload, helpers or not
  EXPECT_EQ(c.warm_up_processes, 2);    // 3 workloads after the first, in 3 shares: the lane's and 2 helpers'
  const SetUpRecord& w = report.set_up.at("solution:" + warm);
  EXPECT_EQ(w.compile_cache_hits, 4);
  EXPECT_EQ(w.warm_up_processes, 0);
  // Markers by process: the warm solution's from its lane alone; the cold one's from its lane and its helpers.
  std::set<std::string> cold_pids, warm_pids;
  for (const auto& e : std::filesystem::directory_iterator(markers)) {
    const std::string name = e.path().filename().string();
    const std::string pid = name.substr(0, name.rfind('_'));
    (name.rfind("cold_cache", 0) == 0 ? cold_pids : warm_pids).insert(pid);
  }
  EXPECT_EQ(warm_pids.size(), 1u);
  EXPECT_GE(cold_pids.size(), 2u);  // a helper ended before it began leaves none
  EXPECT_NE(results_table(report).find("2 warm-up processes"), std::string::npos) << results_table(report);
}

// The torch-compile peer, described, says whether torch.compile's on-disk caches are empty (a stand-in torch here,
// with Inductor's cache-folder function, its package not importable): empty or absent, its set-up's warm-up helpers
// start at once; an entry in the FX graph cache or in AOTAutograd's, and it cannot know: the first workload's set-up
// tells.
TEST(Solutions, TheTorchCompilePeerSaysWhetherItsCompileCacheIsEmpty) {
  PythonWithoutSitePackages python;
  const auto site = test::scratch_dir("fake-torch");
  std::filesystem::create_directories(site / "torch" / "_inductor" / "runtime");
  std::ofstream(site / "torch" / "__init__.py") << "__version__ = '0+stand-in'\n";
  // Importing the real torch._inductor takes seconds of the runner's start: the probe reads the one file it needs.
  std::ofstream(site / "torch" / "_inductor" / "__init__.py") << "raise ImportError('torch._inductor imported')\n";
  std::ofstream(site / "torch" / "_inductor" / "runtime" / "cache_dir_utils.py")
      << "import os\ndef cache_dir():\n    d = os.environ['TORCHINDUCTOR_CACHE_DIR']\n"
         "    os.makedirs(d, exist_ok=True)\n    return d\n";
  const auto cache = site / "inductor-cache";
  ::setenv("PYTHONPATH", site.c_str(), 1);
  ::setenv("TORCHINDUCTOR_CACHE_DIR", cache.c_str(), 1);
  auto described = [] {
    ScratchFolder scratch;  // the peer's Python process ends with it: each description probes afresh
    return make_implementation("torch-compile")->info();
  };
  const ImplementationInfo absent = described();
  EXPECT_EQ(absent.not_installed, "");
  EXPECT_EQ(absent.version, "torch 0+stand-in");
  EXPECT_TRUE(absent.compile_cache_empty);
  std::filesystem::create_directories(cache / "fxgraph");
  std::filesystem::create_directories(cache / "aotautograd");
  EXPECT_TRUE(described().compile_cache_empty);  // the folders alone: nothing compiled yet
  std::ofstream(cache / "aotautograd" / "entry") << "x";
  EXPECT_FALSE(described().compile_cache_empty);
  std::filesystem::remove(cache / "aotautograd" / "entry");
  std::filesystem::create_directories(cache / "fxgraph" / "ab");
  EXPECT_FALSE(described().compile_cache_empty);
  // Round trip through the description a worker sends its runner.
  EXPECT_TRUE(ImplementationInfo::from_json(absent.to_json()).compile_cache_empty);
  EXPECT_FALSE(ImplementationInfo::from_json(described().to_json()).compile_cache_empty);
  ::unsetenv("PYTHONPATH");
  ::unsetenv("TORCHINDUCTOR_CACHE_DIR");
}

// At the end of the bench a solution's Python process sees its input close and exits on its own (its exit handlers
// run, and its worker waits for it, so its CPU time is counted), rather than being killed with its worker. So does
// one started by a bench run in this process (isolate = false): it ends with the bench, not at this process's exit.
TEST(Solutions, APythonProcessEndsCleanlyWithTheBench) {
  PythonWithoutSitePackages python;
  Fixture f;
  for (const bool isolate : {true, false}) {
    SCOPED_TRACE(isolate ? "in a worker" : "in this process");
    const auto marker = test::scratch_dir(std::string("clean-exit-") + (isolate ? "worker" : "here")) / "exited";
    const std::string sol = write_solution(
        fib_solution("clean_exit", "\nimport atexit\natexit.register(lambda: open('" + marker.string() +
                                       "', 'w').close())\n"),
        "clean-exit");
    BenchOptions o = options({"solution:" + sol});
    o.isolate = isolate;
    BenchReport report = run_bench(f.items(), o);
    ASSERT_EQ(report.results.size(), 1u);
    EXPECT_EQ(report.results[0].status, RunStatus::passed) << report.results[0].message;
    EXPECT_TRUE(std::filesystem::exists(marker));
  }
}

// The comparison table: kindex beside the fastest peer that passed, with the ratio.
TEST(Solutions, PeerTableShowsKindexBesideTheFastestPeer) {
  auto result = [](const std::string& impl, double ns, RunStatus status = RunStatus::passed) {
    RunResult r;
    r.definition = "gqa_paged_decode_h32_kv4_d128_ps1";
    r.workload_uuid = "0c2489b2-f878-428b-b1bd-d0c6d4c39338";
    r.implementation = impl;
    r.status = status;
    r.timing.summary = TrialSummary{};
    r.timing.summary->latency = ns;
    return r;
  };
  BenchReport report;
  report.results = {result("kindex", 10000), result("flashinfer", 30000), result("flashinfer-tc", 20000),
                    result("torch-compile", 1000, RunStatus::incorrect_numerical)};
  report.not_available["torch-compile"] = "not installed: ModuleNotFoundError: No module named 'torch'";
  const std::string table = peer_table(report);
  EXPECT_NE(table.find("flashinfer-tc"), std::string::npos) << table;
  EXPECT_NE(table.find("2.00x"), std::string::npos) << table;
  EXPECT_EQ(table.find("3.00x"), std::string::npos) << table;
  EXPECT_NE(table.find("peer torch-compile not available: not installed"), std::string::npos) << table;
  BenchReport no_peers;
  no_peers.results = {result("kindex", 10000)};
  EXPECT_EQ(peer_table(no_peers), "");
}

}  // namespace kindex::runner
