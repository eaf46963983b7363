// What the runner's main job asks of the host for its inputs, before and after drawing them on the device
// (#14 §2): every workload of the three seed problems over the sources' rounds (FlashInfer-Bench 3, SOL-ExecBench
// 10). Measures (1) the host work left when the random floats are drawn on the device (generate_inputs with
// plan_random_floats: page tables, scalars, the used-page masks) for every round, and (2) the host generator's
// throughput per kind (normal, cos/sin, softmax rows) on this machine, from which the host draw of every element
// the main job uses (what the runner did before) is estimated. Prints JSON.
//   [KINDEX_THREADS=N] build/benchmarks/input_generation_bench
#include <cstdio>

#include "catalog/inputs.hpp"
#include "core/parallel.hpp"
#include "seed_problem_rows.hpp"

using namespace kindex;
using namespace kindex::catalog;
using namespace kindex::bench;

namespace {

// Elements fill_random draws for `f` (a paged cache: the used pages only).
double drawn_elements(const RandomFill& f) {
  double n = 1;
  for (int64_t d : f.shape) n *= double(d);
  if (f.pages_used.empty()) return n;
  double used = 0;
  for (uint8_t u : f.pages_used) used += u;
  return used * double(f.page_elems);
}

// Host throughput (elements per second, all threads) of one kind on a tensor of `elements`.
double throughput(RandomFill f, int64_t elements) {
  f.shape = {elements / (f.row ? f.row : 1), f.row ? f.row : 1};
  Tensor t(f.dtype, f.shape);
  fill_random(t, f, 1);  // warm
  const auto t0 = Clock::now();
  fill_random(t, f, 2);
  return double(elements) / seconds_since(t0);
}

}  // namespace

int main() {
  nlohmann::json out = {{"threads", hardware_threads()}};
  RandomFill normal;
  normal.dtype = DType::bf16;
  RandomFill trig = normal;
  trig.kind = RandomFill::Kind::cos_of_angle;
  RandomFill softmax = normal;
  softmax.kind = RandomFill::Kind::softmax_rows;
  softmax.row = 1024;
  const double rate_normal = throughput(normal, 1 << 25), rate_trig = throughput(trig, 1 << 24),
               rate_softmax = throughput(softmax, 1 << 24);
  out["host_elements_per_s"] = {{"normal", rate_normal}, {"cos_of_angle", rate_trig}, {"softmax_rows", rate_softmax}};
  const SeedProblemRows problems = seed_problem_rows([&](const Problem& problem, int rounds) {
    double elements = 0, host_draw_s = 0;
    const auto t0 = Clock::now();
    for (const Workload& w : problem.workloads)
      for (int round = 0; round < rounds; ++round) {
        Inputs plan = generate_inputs(problem.definition, w, default_seed(problem.definition) + uint64_t(round),
                                      {.plan_random_floats = true});
        for (const auto& [input, f] : plan.random) {
          const double n = drawn_elements(f);
          elements += n;
          host_draw_s += n / (f.kind == RandomFill::Kind::normal         ? rate_normal
                              : f.kind == RandomFill::Kind::softmax_rows ? rate_softmax
                                                                         : rate_trig);
        }
      }
    return nlohmann::json{
        {"random_elements_drawn", elements}, {"host_plan_s", seconds_since(t0)}, {"estimated_host_draw_s", host_draw_s}};
  });
  out["problems"] = problems.rows;
  out["total"] = problems.total;
  out["total"]["estimated_host_draw_cpu_s"] = problems.total.at("estimated_host_draw_s").get<double>() * hardware_threads();
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
