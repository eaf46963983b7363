// What comparing the main job's outputs on the host costs, i.e. what the device comparator
// (kindex_gpu_reference_compare, #14 §2) takes off the host: every output element of every workload of the three
// seed problems over the sources' rounds (FlashInfer-Bench 3, SOL-ExecBench 10), counted from the definitions, and
// on this machine the host comparator's throughput (each rule, bf16, all threads) and the rate at which the host
// allocates and zeroes the two output tensors it needs per output (Tensor, as the runner allocated them). The
// device-to-host copies it also saved are not measured here (no GPU). Prints JSON.
//   [KINDEX_THREADS=N] build/benchmarks/compare_bench
#include <cstdio>
#include <random>

#include "catalog/inputs.hpp"
#include "compare/compare.hpp"
#include "core/half.hpp"
#include "core/parallel.hpp"
#include "seed_problem_rows.hpp"

using namespace kindex;
using namespace kindex::catalog;
using namespace kindex::bench;

namespace {

// The best of three (elements per second) for `fn` over `elements`.
template <class Fn>
double rate(int64_t elements, Fn fn) {
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    fn();
    best = std::max(best, double(elements) / seconds_since(t0));
  }
  return best;
}

}  // namespace

int main() {
  const int64_t n = int64_t(1) << 25;
  Tensor x(DType::bf16, {n}), y(DType::bf16, {n});
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    y.ptr<uint16_t>()[i] = float_to_bf16(v);
    x.ptr<uint16_t>()[i] = float_to_bf16(v * (1 + 1e-3f * normal(rng)));
  }
  const double fib_rate = rate(n, [&] { compare::compare_fib("out", x.view(), y.view()); });
  const double sol_rate = rate(n, [&] { compare::compare_sol("out", x.view(), y.view()); });
  const double alloc_rate = rate(n, [&] { Tensor t(DType::bf16, {n}); });  // allocated, zeroed (and freed)

  nlohmann::json out = {{"threads", hardware_threads()},
                        {"host_elements_per_s",
                         {{"compare_fib_bf16", fib_rate},
                          {"compare_sol_bf16", sol_rate},
                          {"allocate_and_zero_bf16", alloc_rate}}}};
  const SeedProblemRows problems = seed_problem_rows([&](const Problem& problem, int rounds) {
    const bool sol = problem.definition.source == Source::sol_execbench;
    double elements = 0;
    for (const Workload& w : problem.workloads) {
      const auto axes = resolve_axes(problem.definition, w);
      for (const auto& spec : problem.definition.outputs) elements += double(shape_numel(concrete_shape(spec, axes)));
    }
    elements *= rounds;
    // Per element: the comparison, and two host tensors allocated and zeroed (the reference's and the
    // implementation's outputs) before the copies.
    const double compare_s = elements / (sol ? sol_rate : fib_rate), alloc_s = 2 * elements / alloc_rate;
    const double s = compare_s + alloc_s, cpu_s = compare_s * hardware_threads() + alloc_s;  // allocation: 1 thread
    return nlohmann::json{{"output_elements_compared", elements}, {"estimated_host_s", s}, {"estimated_host_cpu_s", cpu_s}};
  });
  out["problems"] = problems.rows;
  out["total"] = problems.total;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
