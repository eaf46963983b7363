// The decode-variant dataset (definitions/decode_variants, written by its generate.py) end to end on the CPU: its
// definitions are the decode family's variants, its adversarial page tables have the shapes its README promises, a
// call's C ABI fields come from the inputs FlashInfer names (the dispatch), and each definition's Python reference
// (run with torch where installed, else on numpy: tests/support/definition_reference) agrees with kindex's CPU
// reference through that dispatch, while the plain decode of the same inputs does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "runner/execute/pipeline.hpp"
#include "runner/execute/problem.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"
#include "catalog/constraints.hpp"
#include "catalog/inputs.hpp"
#include "catalog/loader.hpp"
#include "catalog/safetensors.hpp"
#include "compare/compare.hpp"
#include "kindex/cpu_reference.h"

namespace kindex::runner {
namespace {

namespace fs = std::filesystem;
using catalog::DecodeParams;
using catalog::Definition;
using catalog::Problem;
using catalog::Workload;

fs::path dataset() { return fs::path(test::source_dir()) / "definitions" / "decode_variants"; }

const std::vector<Problem>& problems() {
  static const std::vector<Problem> p = catalog::load_dataset(dataset());
  return p;
}

// The workload whose page table is a file of the dataset (generate.py writes one per definition, first).
const Workload& adversarial(const Problem& p) {
  for (const Workload& w : p.workloads)
    if (w.inputs.at("kv_indptr").kind == catalog::InputSpec::Kind::safetensors) return w;
  throw std::runtime_error(p.definition.name + " has no adversarial workload");
}

// One call's host arguments as the pipeline builds them (RunRounds::host_args, PreparedCall): the workload's
// inputs by name, outputs of the declared shapes, the definition's layout.
struct Call {
  catalog::Inputs inputs;
  std::map<std::string, Tensor> outputs;
  CallArgs args;
};

std::unique_ptr<Call> make_call(const Definition& def, const Workload& w) {
  auto c = std::make_unique<Call>();
  c->inputs = catalog::generate_inputs(def, w, catalog::default_seed(def));
  for (const auto& [name, t] : c->inputs.tensors) c->args.inputs[name] = t.view();
  c->args.scalars = c->inputs.scalars;
  c->args.kv_layout = decode_kv_layout(def);
  const auto axes = catalog::resolve_axes(def, w);
  for (const auto& spec : def.outputs) {
    auto [it, _] = c->outputs.emplace(spec.name, Tensor(spec.dtype, catalog::concrete_shape(spec, axes)));
    c->args.outputs[spec.name] = it->second.view();
  }
  return c;
}

kindex_paged_decode_params cpu_reference(const kindex_paged_decode_params& p) {
  EXPECT_EQ(kindex_cpu_reference_paged_decode(&p), KINDEX_STATUS_OK) << kindex_cpu_reference_last_error();
  return p;
}

int run_command(const std::string& command) {
  const int status = std::system(command.c_str());
  return status == -1 ? -1 : WEXITSTATUS(status);
}

bool have_python_numpy() { return run_command("python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

// The definition's Python reference on the call's inputs (run_reference.py), its outputs by name.
std::map<std::string, Tensor> python_reference(const Definition& def, const Call& c, const fs::path& dir,
                                               std::string* which) {
  nlohmann::json scalars = c.inputs.scalars;
  catalog::write_safetensors(dir / "inputs.safetensors", c.inputs.tensors, {{"scalars", scalars.dump()}});
  const std::string script =
      (fs::path(test::source_dir()) / "tests" / "support" / "definition_reference" / "run_reference.py").string();
  const std::string command = "python3 '" + script + "' '" + def.file + "' '" + (dir / "inputs.safetensors").string() +
                              "' '" + (dir / "outputs.safetensors").string() + "' > '" + (dir / "which").string() +
                              "' 2>&1";
  const int status = run_command(command);
  std::ifstream in(dir / "which");
  *which = std::string(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(status, 0) << *which;
  if (status != 0) return {};
  return catalog::read_safetensors(dir / "outputs.safetensors").tensors;
}

// Both outputs within one rounding of each other: the Python reference computes in float32 and rounds its output to
// bfloat16, the CPU reference in float64 (the output rounded once), so outputs may differ by a bfloat16 step (2^-8
// relative, and a little absolute near zero) and lse by float32 summation error (about 1e-6 here). Far tighter than
// FlashInfer-Bench's atol = rtol = 1e-2, which lets an off-by-one window or a soft-cap of 50 on these logits pass.
bool agrees(const std::map<std::string, Tensor>& actual, const Call& expected, std::string* why) {
  const std::map<std::string, compare::FibTolerance> tolerance = {{"output", {1e-3, 8e-3}}, {"lse", {1e-4, 1e-6}}};
  bool ok = true;
  for (const auto& [name, t] : expected.outputs) {
    auto it = actual.find(name);
    if (it == actual.end()) {
      *why += name + " missing; ";
      ok = false;
      continue;
    }
    const compare::Report r = compare::compare_fib(name, it->second.view(), t.view(), tolerance.at(name));
    if (!r.passed) *why += name + ": " + r.reason + "; ";
    ok = ok && r.passed;
  }
  return ok;
}

}  // namespace

TEST(DecodeVariants, DefinitionsAreTheFamilysVariantsWithReferences) {
  ASSERT_EQ(problems().size(), 7u);
  std::set<std::string> suffixes;
  for (const Problem& p : problems()) {
    const Definition& def = p.definition;
    SCOPED_TRACE(def.name);
    const auto params = catalog::parse_decode_name(def.name);
    ASSERT_TRUE(params);
    EXPECT_FALSE(params->is_plain());
    std::string difference;
    EXPECT_TRUE(catalog::same_signature(def, catalog::decode_definition(*params), &difference)) << difference;
    const auto read = catalog::decode_family_params(def);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->name(), def.name);
    EXPECT_EQ(problem_kind(def), ProblemKind::paged_decode);
    EXPECT_FALSE(gpu_reference_computes(def));
    EXPECT_NE(def.reference.find("def run("), std::string::npos);
    // Not a name kindex generates a definition for: a variant's comes with its reference, from its dataset.
    EXPECT_FALSE(catalog::find_builtin(def.name));
    try {
      resolve_problems(def.name);
      ADD_FAILURE() << "resolved " << def.name << " by name";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("definitions/decode_variants/"), std::string::npos) << e.what();
    }
    suffixes.insert(def.name.substr(def.name.find("_ps") + 3));
    ASSERT_EQ(p.workloads.size(), 3u);
    EXPECT_TRUE(catalog::is_small(def, adversarial(p)));
    for (const Workload& w : p.workloads) {  // what `kindex catalog check` checks
      catalog::GenerateOptions options;
      options.skip_random_floats = true;
      const catalog::Inputs in = catalog::generate_inputs(def, w, 1, options);
      EXPECT_NO_THROW(catalog::check_inputs(def, catalog::resolve_axes(def, w), in, w.source, true)) << w.uuid;
    }
  }
  EXPECT_EQ(suffixes, (std::set<std::string>{"16_softcap_swa", "16_swa_sink", "16_e4m3", "64_e5m2", "16_q4", "16_hnd",
                                             "16_rope"}));
}

// README "Adversarial page tables": scattered ids, a page several requests share, the same page twice in one
// request, a 1-token request, partial, 1-token and full last pages, a request longer than the window.
TEST(DecodeVariants, AdversarialPageTablesHaveTheirShapes) {
  for (const Problem& p : problems()) {
    SCOPED_TRACE(p.definition.name);
    const Workload& w = adversarial(p);
    const auto in = catalog::generate_inputs(p.definition, w, 1, {.skip_random_floats = true});
    const auto params = *catalog::decode_family_params(p.definition);
    const Tensor &indptr = in.tensors.at("kv_indptr"), &indices = in.tensors.at("kv_indices"),
                 &last = in.tensors.at("kv_last_page_len");
    std::map<int64_t, int> requests_of_page;
    bool repeat_inside = false, unsorted = false;
    std::vector<int64_t> tokens;
    for (int64_t b = 0; b + 1 < indptr.numel(); ++b) {
      std::set<int64_t> seen;
      for (int64_t i = int64_t(indptr.get(b)); i < int64_t(indptr.get(b + 1)); ++i) {
        const auto id = int64_t(indices.get(i));
        if (!seen.insert(id).second) repeat_inside = true;
        if (i > int64_t(indptr.get(b)) && id < int64_t(indices.get(i - 1))) unsorted = true;
      }
      for (int64_t id : seen) ++requests_of_page[id];
      const int64_t pages = int64_t(indptr.get(b + 1) - indptr.get(b));
      tokens.push_back((pages - 1) * params.page_size + int64_t(last.get(b)));
    }
    EXPECT_TRUE(repeat_inside);
    EXPECT_TRUE(unsorted);
    EXPECT_GE(std::max_element(requests_of_page.begin(), requests_of_page.end(),
                               [](auto& a, auto& b) { return a.second < b.second; })
                  ->second,
              5);
    std::set<int64_t> last_lengths;
    for (int64_t b = 0; b < last.numel(); ++b) last_lengths.insert(int64_t(last.get(b)));
    EXPECT_TRUE(last_lengths.count(1));
    EXPECT_TRUE(last_lengths.count(params.page_size));
    EXPECT_TRUE(std::any_of(last_lengths.begin(), last_lengths.end(),
                            [&](int64_t n) { return n > 1 && n < params.page_size; }));
    EXPECT_EQ(*std::min_element(tokens.begin(), tokens.end()), std::max<int64_t>(1, params.q_len_per_req));
    if (params.window)
      EXPECT_GT(*std::max_element(tokens.begin(), tokens.end()), int64_t(in.scalars.at("window_left")) + 1);
    EXPECT_GT(in.tensors.at("kv_indices").numel(), 0);
    EXPECT_LT(requests_of_page.size(), size_t(w.axes.at("num_pages")));  // unused pages in the cache
  }
}

// The dispatch: each C ABI field from the input FlashInfer names (decode_abi_params), the rest at kindex.h's
// defaults.
TEST(DecodeVariants, CallFieldsComeFromTheNamedInputs) {
  const kindex_paged_decode_params plain = KINDEX_PAGED_DECODE_PARAMS_INIT;
  for (const Problem& p : problems()) {
    const Definition& def = p.definition;
    SCOPED_TRACE(def.name);
    const Workload& w = adversarial(p);
    const auto c = make_call(def, w);
    const auto v = *catalog::decode_family_params(def);
    const auto s = [&](const char* name, double fallback) {
      auto it = c->inputs.scalars.find(name);
      return it == c->inputs.scalars.end() ? fallback : it->second;
    };
    const kindex_paged_decode_params q = decode_abi_params(c->args);
    EXPECT_EQ(q.batch_size, w.axes.at("batch_size"));
    EXPECT_EQ(q.num_qo_heads, v.num_qo_heads);
    EXPECT_EQ(q.num_kv_heads, v.num_kv_heads);
    EXPECT_EQ(q.page_size, v.page_size);
    EXPECT_EQ(q.head_dim, v.head_dim);
    EXPECT_EQ(q.num_pages, w.axes.at("num_pages"));
    EXPECT_EQ(q.kv_format, v.kv_format);
    EXPECT_EQ(q.kv_layout, v.hnd ? KINDEX_KV_LAYOUT_HND : KINDEX_KV_LAYOUT_NHD);
    EXPECT_EQ(q.q_len_per_req, v.q_len_per_req);
    EXPECT_EQ(q.sm_scale, float(s("sm_scale", 0)));
    EXPECT_EQ(q.k_scale, float(s("k_scale", plain.k_scale)));
    EXPECT_EQ(q.v_scale, float(s("v_scale", plain.v_scale)));
    EXPECT_EQ(q.logits_soft_cap, float(s("logits_soft_cap", plain.logits_soft_cap)));
    EXPECT_EQ(q.window_left, int32_t(s("window_left", plain.window_left)));
    EXPECT_EQ(q.pos_encoding, v.rope ? KINDEX_POS_ENCODING_ROPE_LLAMA : KINDEX_POS_ENCODING_NONE);
    EXPECT_EQ(q.rope_scale, float(s("rope_scale", plain.rope_scale)));
    EXPECT_EQ(q.rope_theta, float(s("rope_theta", plain.rope_theta)));
    EXPECT_EQ(q.sinks, v.sinks ? c->inputs.tensors.at("sinks").ptr<const float>() : nullptr);
    EXPECT_FALSE(q.k_scale == 1.0f && q.v_scale == 1.0f && q.logits_soft_cap == 0 && q.window_left < 0 && !q.sinks &&
                 q.pos_encoding == KINDEX_POS_ENCODING_NONE && q.kv_layout == KINDEX_KV_LAYOUT_NHD &&
                 q.q_len_per_req == 1)
        << "a variant definition's call must differ from the plain decode's";
  }
}

// f() must throw an Error naming `field`, with `value` in its message.
template <class F>
void expect_refused(F f, const std::string& field, const std::string& value) {
  try {
    f();
    ADD_FAILURE() << "accepted " << field << " " << value;
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), field);
    EXPECT_NE(std::string(e.what()).find(value), std::string::npos) << e.what();
  }
}

TEST(DecodeVariants, BadVariantInputsAreRefusedNamingFieldAndValue) {
  const Problem& swa = *std::find_if(problems().begin(), problems().end(),
                                     [](const Problem& p) { return p.definition.name.ends_with("_swa_sink"); });
  auto c = make_call(swa.definition, adversarial(swa));
  c->args.scalars["window_left"] = 12.5;
  expect_refused([&] { decode_abi_params(c->args); }, "window_left", "12.5");
  catalog::Inputs bad = c->inputs;
  bad.scalars["window_left"] = -2;
  expect_refused(
      [&] { catalog::check_inputs(swa.definition, catalog::resolve_axes(swa.definition, adversarial(swa)), bad, "test"); },
      "window_left", "-2");
  const Problem& fp8 = *std::find_if(problems().begin(), problems().end(),
                                     [](const Problem& p) { return p.definition.name.ends_with("_e4m3"); });
  c = make_call(fp8.definition, adversarial(fp8));
  c->args.scalars["k_scale"] = 0;
  expect_refused([&] { decode_abi_params(c->args); }, "k_scale", "0");
  // Rows that are not a whole number per request.
  c = make_call(swa.definition, adversarial(swa));
  c->args.inputs["q"].shape[0] += 1;
  EXPECT_THROW(decode_abi_params(c->args), Error);
}

// Each definition's reference (Python, FlashInfer-Bench's form) and kindex's CPU reference through the dispatch
// agree on the adversarial workload; the plain decode (every variant field dropped that can be without reading
// past a buffer) does not, so the agreement is about the variant.
TEST(DecodeVariants, PythonReferenceAgreesWithTheCpuReferenceThroughTheDispatch) {
  if (!have_python_numpy()) GTEST_SKIP() << "no python3 with numpy";
  const fs::path dir = test::scratch_dir("decode-variants");
  for (const Problem& p : problems()) {
    const Definition& def = p.definition;
    SCOPED_TRACE(def.name);
    const auto c = make_call(def, adversarial(p));
    const kindex_paged_decode_params q = cpu_reference(decode_abi_params(c->args));
    std::string which;
    const auto python = python_reference(def, *c, dir, &which);
    std::string why;
    EXPECT_TRUE(agrees(python, *c, &why)) << which << ": " << why;

    const auto v = *catalog::decode_family_params(def);
    if (v.q_len_per_req > 1) continue;  // the causal limit among a request's rows has no plain form to drop to
    // The call's version-1 fields (sizes, tensors, sm_scale), every version-2 one at its default but the caches'
    // format (their bytes): the plain decode of these inputs.
    kindex_paged_decode_params dropped = KINDEX_PAGED_DECODE_PARAMS_INIT;
    std::memcpy(&dropped, &q, KINDEX_PAGED_DECODE_PARAMS_V1_SIZE);
    dropped.kv_format = q.kv_format;
    cpu_reference(dropped);
    why.clear();
    EXPECT_FALSE(agrees(python, *c, &why)) << "the plain decode of " << def.name << " passes too";
  }
}

// What an implementation receives through the whole bench path (plan, round inputs, the call's C ABI params), seen
// by an external library that records its params (tests/runner/external/fake_decode.c, mode 5).
TEST(DecodeVariants, TheBenchHandsAnImplementationTheVariantFields) {
  const std::string lib = test::fake_decode_library(5);
  ASSERT_FALSE(lib.empty());
  const fs::path file = test::scratch_dir("decode-variants-params") / "params.txt";
  ASSERT_EQ(::setenv("KX_PARAMS_FILE", file.c_str(), 1), 0);
  BenchOptions o;
  o.trials = 1;
  o.reference = "cpu-reference";
  for (const Problem& p : problems()) {
    SCOPED_TRACE(p.definition.name);
    const Workload& w = adversarial(p);
    bool sticky = false;
    const RunResult r = execute_run(WorkItem{&p.definition, &w}, "external:" + lib, o, /*gpu=*/false, &sticky);
    EXPECT_NE(r.message.find("params recorded"), std::string::npos) << r.message;
    std::ifstream in(file);
    std::string line, last;
    while (std::getline(in, line)) last = line;
    std::map<std::string, std::string> got;
    std::istringstream fields(last);
    for (std::string field; fields >> field;) got[field.substr(0, field.find('='))] = field.substr(field.find('=') + 1);
    const auto v = *catalog::decode_family_params(p.definition);
    const auto scalar = [&](const char* name, const char* fallback) {
      auto it = w.inputs.find(name);
      if (it == w.inputs.end()) return std::string(fallback);
      char text[32];
      std::snprintf(text, sizeof text, "%g", it->second.value);
      return std::string(text);
    };
    EXPECT_EQ(got["batch_size"], std::to_string(w.axes.at("batch_size")));
    EXPECT_EQ(got["num_kv_heads"], std::to_string(v.num_kv_heads));
    EXPECT_EQ(got["page_size"], std::to_string(v.page_size));
    EXPECT_EQ(got["kv_format"], std::to_string(int(v.kv_format)));
    EXPECT_EQ(got["kv_layout"], v.hnd ? "1" : "0");
    EXPECT_EQ(got["q_len_per_req"], std::to_string(v.q_len_per_req));
    EXPECT_EQ(got["k_scale"], scalar("k_scale", "1"));
    EXPECT_EQ(got["v_scale"], scalar("v_scale", "1"));
    EXPECT_EQ(got["window_left"], scalar("window_left", "-1"));
    EXPECT_EQ(got["logits_soft_cap"], scalar("logits_soft_cap", "0"));
    EXPECT_EQ(got["sinks"], v.sinks ? "1" : "0");
    EXPECT_EQ(got["pos_encoding"], v.rope ? "1" : "0");
    EXPECT_EQ(got["rope_scale"], scalar("rope_scale", "1"));
    EXPECT_EQ(got["rope_theta"], scalar("rope_theta", "10000"));
  }
  ::unsetenv("KX_PARAMS_FILE");
}

// The bench's CPU path on every definition's small workloads: the CPU reference checked against a second call, and
// the reference the bench picks for a variant on a GPU machine is the CPU one (the GPU reference computes the
// plain decode only).
TEST(DecodeVariants, BenchRunsTheCpuReferenceAndPicksItAsTheTruth) {
  BenchOptions o;
  o.trials = 1;
  o.iterations = 1;
  o.warmup = 0;
  for (const Problem& p : problems()) {
    SCOPED_TRACE(p.definition.name);
    const WorkItem item{&p.definition, &adversarial(p)};
    bool sticky = false;
    RunResult r = execute_run(item, "cpu-reference", o, /*gpu=*/false, &sticky);
    EXPECT_EQ(r.status, RunStatus::passed) << r.message;
    EXPECT_EQ(r.reference_implementation, "cpu-reference");
    // On a GPU machine the automatic reference of a variant is still the CPU one: with the implementation the CPU
    // reference too, nothing touches the device.
    r = execute_run(item, "cpu-reference", o, /*gpu=*/true, &sticky);
    EXPECT_EQ(r.status, RunStatus::passed) << r.message;
    EXPECT_EQ(r.reference_implementation, "cpu-reference");
    EXPECT_EQ(r.check, "determinism");
  }
}

}  // namespace kindex::runner
