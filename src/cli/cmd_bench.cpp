// `kindex bench`: verify and time implementations the way FlashInfer-Bench and SOL-ExecBench do, and record the
// results as traces, KernelIndex manifests and store rows. A thin layer over src/runner/session.hpp.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "runner/gpus.hpp"
#include "runner/session.hpp"
#include "runner/execute/solution.hpp"
#include "catalog/builtin.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace kindex::cli {

void add_run_options(CLI::App* cmd, runner::SessionOptions& s, bool& events) {
  cmd->add_option("--problem", s.problems,
                  "Bundled problem name (see --list) or a definition file / dataset directory; repeatable");
  cmd->add_option("--workloads", s.workloads, "all | small | uuid (prefix) list | index ranges like 0-3,7")
      ->default_val("all");
  cmd->add_option("--impl", s.bench.implementations,
                  "kindex | gpu-reference | cpu-reference | external:PATH.so (exports kindex's C ABI) | "
                  "solution:PATH.json (a FlashInfer-Bench or SOL-ExecBench solution in Python) | a peer: " +
                      runner::peer_names_text() + "; repeatable")
      ->default_val(std::vector<std::string>{"kindex"});
  cmd->add_option("--peer", s.bench.peers,
                  "A peer run beside --impl where it is the harness's own baseline (FlashInfer on FlashInfer-Bench "
                  "decode, torch.compile on SOL-ExecBench); the table compares kindex with the fastest; one not "
                  "installed is reported, not run. Repeatable: " + runner::peer_names_text())
      ->check(CLI::IsMember(runner::peer_names()));
  cmd->add_option("--reference", s.bench.reference,
                  "What outputs are judged against: auto | cpu-reference | gpu-reference")
      ->check(CLI::IsMember({"auto", "cpu-reference", "gpu-reference"}))
      ->default_val("auto");
  cmd->add_option("--trials", s.bench.trials,
                  "Correctness rounds of fresh inputs (FlashInfer-Bench 3, SOL-ExecBench 10)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--timing-trials", s.bench.timing_trials, "Timed trials (FlashInfer-Bench 3, SOL-ExecBench 1)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--iterations", s.bench.iterations, "Timed iterations per trial (50; 5 on the CPU path)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", s.bench.warmup, "Warm-up calls (10; 1 on the CPU path)")->check(CLI::Range(0, 100000));
  cmd->add_option("--seed", s.bench.seed, "Base seed of the inputs (FlashInfer-Bench 1, SOL-ExecBench 200)");
  cmd->add_option("--timeout", s.bench.timeout_s, "Seconds per (implementation, workload) before it is a timeout")
      ->check(CLI::Range(0.001, 1e6))
      ->default_val(900);
  cmd->add_flag("--events", events, "Time with CUDA events instead of the CUPTI activity API");
}

void add_bench_command(CLI::App& app, Registry& registry) {
  auto s = std::make_shared<runner::SessionOptions>();
  s->output.out_dir = "kindex-results";
  auto list = std::make_shared<bool>(false);
  auto events = std::make_shared<bool>(false);
  auto in_process = std::make_shared<bool>(false);
  auto store = std::make_shared<std::string>();
  auto baseline = std::make_shared<std::string>();
  auto gpus = std::make_shared<std::string>();

  CLI::App* cmd = app.add_subcommand("bench", "Verify and time implementations on a problem's workloads");
  add_run_options(cmd, *s, *events);
  cmd->add_option("--out", s->output.out_dir,
                  "Output directory for traces, manifests, samples, results.json ('' = none)")
      ->default_val("kindex-results");
  cmd->add_option("--store", *store,
                  std::string("Store URI: sqlite:PATH, PATH, postgresql://... or 'none' (default $KINDEX_STORE or ") +
                      kDefaultStore + ")");
  cmd->add_option("--baseline", *baseline,
                  "L2/003: T_b of the SOL score from this file (benchmarks/gpu/backward_vs_torch.py's JSON: torch.compile "
                  "measured on this GPU) instead of the published H200/B200 table");
  cmd->add_flag("--json", s->json, "Print the machine-readable report on stdout instead of the table");
  cmd->add_option("--gpus", *gpus,
                  "Spread the runs over these GPUs: all, or ordinals like 0,2 (one runner pinned to each GPU, the "
                  "workloads dealt among them; results in the same order as on one GPU)");
  cmd->add_flag("--in-process", *in_process, "Run without worker processes (no crash isolation, no timeout)");
  cmd->add_flag("--list", *list, "List the bundled problems and exit");

  cmd->callback([&registry, s, list, events, in_process, store, baseline, gpus] {
    registry.selected = [s, list, events, in_process, store, baseline, gpus] {
      if (*list) {
        for (const auto& name : catalog::list_builtin()) std::cout << name << "\n";
        return 0;
      }
      if (s->problems.empty())
        throw Error("kindex bench", "--problem", "", "is required (see --list for the bundled problems)");
      s->output.store_uri = *store == "none" ? "" : store_uri(*store);
      if (!baseline->empty()) s->bench.baseline = runner::load_baseline_times(*baseline);
      s->bench.prefer_cupti = !*events;
      s->bench.isolate = !*in_process;
      if (!gpus->empty()) {
        if (*in_process) throw Error("kindex bench", "--gpus", *gpus, "needs worker processes (drop --in-process)");
        s->bench.gpus = runner::gpu_ordinals(*gpus, runner::probe_gpu_count());
      }
      s->bench.progress = !s->json && isatty(STDERR_FILENO);
      return runner::run_session(*s, std::cout, std::cerr);
    };
  });
}

int bench_main_job(const Registry& registry) {
  const bool gpu = runner::probe_gpu();
  runner::SessionOptions s = runner::main_job_options(gpu);
  s.bench.progress = isatty(STDERR_FILENO);
  if (!registry.main_job_workloads.empty()) s.workloads = registry.main_job_workloads;
  s.output.store_uri = store_uri(registry.main_job_store);
  std::cout << (gpu ? "kindex: GPU found: benchmarking kindex's kernels on the seed problems' bundled workloads, "
                      "beside the installed peers (FlashInfer, torch.compile)\n"
                    : "kindex: no GPU: running the CPU path (the CPU reference on the small workloads)\n");
  int code = runner::run_session(s, std::cout, std::cerr);
  // Where to look next: both commands read the store just written (the same default, or the one named here).
  std::string store_option = registry.main_job_store.empty() ? "" : " --store " + registry.main_job_store;
  const std::string& problem = s.problems.front();
  std::cout << "\nnext: browse the runs with `kindex serve" << store_option << "` at http://127.0.0.1:8080/operations/"
            << problem << "\n      or list the records with `kindex records" << store_option << " " << problem << "`\n";
  return code;
}

}  // namespace kindex::cli
