#include "catalog/loader.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "support/paths.hpp"

namespace kindex::catalog {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

fs::path specs() { return fs::path(test::data_dir()) / "specs"; }
fs::path fib_definition_path(const std::string& name) {
  return specs() / "flashinfer-trace" / "definitions" / "gqa_paged" / (name + ".json");
}
fs::path sol_dir() { return specs() / "sol-execbench" / "L2" / "003_grouped_query_attention_with_rope_backward"; }

ojson ps64_json() { return ojson::parse(test::read_file(fib_definition_path("gqa_paged_decode_h24_kv4_d128_ps64"))); }
Definition ps64() { return parse_definition(ps64_json().dump(), "ps64.json"); }

std::string ps64_line(int64_t batch = 2, int64_t pages = 1348, int64_t len_indptr = 3, int64_t indices = 130) {
  ojson w = {
      {"uuid", "u-1"},
      {"axes", {{"batch_size", batch}, {"num_pages", pages}, {"len_indptr", len_indptr}, {"num_kv_indices", indices}}},
      {"inputs", {{"sm_scale", {{"type", "scalar"}, {"value", 0.088}}}}}};
  return ojson{{"definition", "gqa_paged_decode_h24_kv4_d128_ps64"}, {"workload", w}}.dump();
}

TEST(Loader, EveryUpstreamSpecFileLoads) {
  size_t definitions = 0, workload_files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(specs())) {
    const fs::path& p = entry.path();
    if (!entry.is_regular_file()) continue;
    if (p.filename() == "published-b200.json") {  // a data table, not a definition: it must parse as JSON
      EXPECT_TRUE(nlohmann::json::parse(test::read_file(p)).is_object());
      continue;
    }
    if (p.extension() == ".json") {
      SCOPED_TRACE(p.string());
      Problem problem = load_problem(p);
      EXPECT_FALSE(problem.definition.reference.empty());
      ++definitions;
      if (!problem.workloads.empty()) ++workload_files;
    }
  }
  EXPECT_EQ(definitions, 18u);
  EXPECT_EQ(workload_files, 2u);  // h32_kv4_d128_ps1 (48 lines) and SOL L2/003 (16 lines)

  std::vector<Error> errors;
  auto problems = load_dataset(specs(), &errors);
  for (const auto& e : errors) ADD_FAILURE() << e.what();
  ASSERT_EQ(problems.size(), 18u);
  size_t workloads = 0;
  for (const auto& p : problems) workloads += p.workloads.size();
  EXPECT_EQ(workloads, 48u + 16u);
}

TEST(Loader, FibDefinitionModel) {
  Problem p = load_problem(fib_definition_path("gqa_paged_decode_h32_kv4_d128_ps1"));
  const Definition& d = p.definition;
  EXPECT_EQ(d.source, Source::flashinfer_bench);
  EXPECT_EQ(d.op_type, "gqa_paged");
  ASSERT_EQ(d.axes.size(), 8u);
  EXPECT_EQ(d.axes[0].first, "batch_size");
  EXPECT_EQ(d.axis("num_qo_heads")->value, 32);
  EXPECT_EQ(d.axis("page_size")->value, 1);
  EXPECT_EQ(d.axis("num_pages")->kind, Axis::Kind::variable);
  ASSERT_EQ(d.inputs.size(), 6u);  // ps1: no kv_last_page_len
  EXPECT_EQ(d.inputs[0].name, "q");
  EXPECT_EQ(d.inputs[5].name, "sm_scale");
  EXPECT_TRUE(d.inputs[5].is_scalar());
  EXPECT_EQ(d.input("kv_indices")->dtype, DType::i32);
  EXPECT_EQ(d.constraints.size(), 2u);
  ASSERT_EQ(p.workloads.size(), 48u);
  const Workload& w = p.workloads[0];
  EXPECT_EQ(w.uuid, "0c2489b2-f878-428b-b1bd-d0c6d4c39338");
  EXPECT_EQ(
      w.source,
      (specs() / "flashinfer-trace" / "workloads" / "gqa_paged" / "gqa_paged_decode_h32_kv4_d128_ps1.jsonl").string() +
          ":1");
  EXPECT_EQ(w.axes.at("num_pages"), 8);
  EXPECT_EQ(w.inputs.at("kv_indices").kind, InputSpec::Kind::safetensors);
  EXPECT_EQ(w.inputs.at("kv_indices").tensor_key, "kv_indices");
  EXPECT_EQ(w.inputs.at("q").kind, InputSpec::Kind::random);
  EXPECT_NEAR(w.inputs.at("sm_scale").value, 0.08838834, 1e-7);
  EXPECT_EQ(fs::path(w.base_dir), specs() / "flashinfer-trace");  // blob paths are relative to the dataset root
}

TEST(Loader, SolDefinitionModelAndExpressionAxes) {
  Problem p = load_problem(sol_dir() / "definition.json");
  EXPECT_EQ(p.definition.source, Source::sol_execbench);
  EXPECT_EQ(p.definition.axis("q_proj_size")->kind, Axis::Kind::expression);
  ASSERT_EQ(p.workloads.size(), 16u);
  auto axes = resolve_axes(p.definition, p.workloads[0]);
  EXPECT_EQ(axes.at("q_proj_size"), 4096);
  EXPECT_EQ(axes.at("kv_proj_size"), 1024);
  EXPECT_EQ(axes.at("seq_len"), 691);
  EXPECT_EQ(concrete_shape(*p.definition.input("q_weight"), axes), (std::vector<int64_t>{4096, 5120}));
  ASSERT_TRUE(p.workloads[0].tolerance);
  EXPECT_DOUBLE_EQ(p.workloads[0].tolerance->max_atol, 0.039);
  EXPECT_DOUBLE_EQ(p.workloads[0].tolerance->max_rtol, 0.05);
  EXPECT_DOUBLE_EQ(*p.workloads[0].tolerance->required_match_ratio, 0.98);
}

TEST(Loader, MalformedJsonNamesFileAndPosition) {
  test::TempDir dir;
  auto file = dir.write("bad.json", "{\n  \"name\": \"x\",\n  \"axes\": {,}\n}\n");
  Error e = test::catch_error([&] { load_definition(file); });
  EXPECT_EQ(e.where(), file.string());
  EXPECT_NE(e.field().find("line 3"), std::string::npos) << e.what();
  EXPECT_NE(e.problem().find("malformed JSON"), std::string::npos) << e.what();

  // A number beyond double range is refused the same way (found by fuzzing).
  EXPECT_KINDEX_ERROR(parse_definition("{\"name\": 1e999}", "big.json"), "big.json", "JSON", "");

  Definition def = ps64();
  EXPECT_KINDEX_ERROR(parse_workloads(ps64_line() + "\n{\"uuid\": \n", def, "w.jsonl"), "w.jsonl", "line 2: column",
                      "");
}

TEST(Loader, DefinitionValidation) {
  struct Case {
    const char* what;
    std::function<void(ojson&)> mutate;
    std::string field, value;
  };
  std::vector<Case> cases = {
      {"unknown dtype", [](ojson& j) { j["inputs"]["q"]["dtype"] = "bfloat17"; }, "inputs.q.dtype", "bfloat17"},
      {"shape names no axis", [](ojson& j) { j["inputs"]["k_cache"]["shape"][1] = "page_sise"; },
       "inputs.k_cache.shape[1]", "page_sise"},
      {"const axis without value", [](ojson& j) { j["axes"]["page_size"].erase("value"); }, "axes.page_size.value", ""},
      {"const axis of 0", [](ojson& j) { j["axes"]["page_size"]["value"] = 0; }, "axes.page_size.value", "0"},
      {"const axis not an integer", [](ojson& j) { j["axes"]["page_size"]["value"] = 6.5; }, "axes.page_size.value",
       "6.5"},
      {"unknown axis kind", [](ojson& j) { j["axes"]["page_size"]["type"] = "constant"; }, "axes.page_size.type",
       "constant"},
      {"var axis with a value", [](ojson& j) { j["axes"]["num_pages"]["value"] = 3; }, "axes.num_pages.value", "3"},
      {"expr over an unknown axis",
       [](ojson& j) {
         j["axes"]["len_indptr"] = {{"type", "expr"}, {"expression", "batch + 1"}};
       },
       "axes.len_indptr.expression", ""},
      {"expr cycle",
       [](ojson& j) {
         j["axes"]["len_indptr"] = {{"type", "expr"}, {"expression", "num_kv_indices + 1"}};
         j["axes"]["num_kv_indices"] = {{"type", "expr"}, {"expression", "len_indptr - 1"}};
       },
       "axes.", ""},
      {"expr not positive",
       [](ojson& j) {
         j["axes"]["len_indptr"] = {{"type", "expr"}, {"expression", "head_dim - 128"}};
       },
       "axes.len_indptr.expression", ""},
      {"unknown key", [](ojson& j) { j["inputs"]["q"]["dtpye"] = "bfloat16"; }, "inputs.q.dtpye", ""},
      {"output named like an input", [](ojson& j) { j["outputs"]["q"] = j["outputs"]["lse"]; }, "outputs.q", ""},
      {"constraint syntax", [](ojson& j) { j["constraints"][0] = "len_indptr == = 1"; }, "constraints[0]",
       "len_indptr == = 1"},
      {"constraint over an unknown name", [](ojson& j) { j["constraints"][1] = "num_kv_indices == kv_indptrs[-1]"; },
       "constraints[1]", "kv_indptrs"},
      {"missing inputs", [](ojson& j) { j.erase("inputs"); }, "inputs", ""},
      {"bad name", [](ojson& j) { j["name"] = "../../etc"; }, "name", "../../etc"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ojson j = ps64_json();
    c.mutate(j);
    EXPECT_KINDEX_ERROR(parse_definition(j.dump(), "user/def.json"), "user/def.json", c.field, c.value);
  }
  // Duplicate input names cannot be expressed through a JSON library: write the text.
  std::string text = ps64_json().dump();
  auto pos = text.find("\"k_cache\"");
  text.replace(pos, 9, "\"q\"");
  EXPECT_KINDEX_ERROR(parse_definition(text, "dup.json"), "dup.json", "inputs.q", "q");
}

TEST(Loader, WorkloadValidation) {
  Definition def = ps64();
  Workload ok = parse_workload_line(ps64_line(), def, "w.jsonl", 1);
  EXPECT_EQ(ok.axes.at("batch_size"), 2);
  EXPECT_EQ(ok.inputs.at("q").kind, InputSpec::Kind::random);  // unlisted tensors are random

  auto line = [](std::function<void(ojson&)> mutate) {
    ojson j = ojson::parse(ps64_line());
    mutate(j["workload"]);
    return j.dump();
  };
  struct Case {
    const char* what;
    std::string text;
    std::string field, value;
  };
  std::vector<Case> cases = {
      {"axis not positive", line([](ojson& w) { w["axes"]["batch_size"] = 0; }), "line 7: workload.axes.batch_size",
       "0"},
      {"axis not an integer", line([](ojson& w) { w["axes"]["num_pages"] = "9"; }), "line 7: workload.axes.num_pages",
       "\"9\""},
      {"axis missing", line([](ojson& w) { w["axes"].erase("num_pages"); }), "line 7: workload.axes.num_pages", ""},
      {"const axis given", line([](ojson& w) { w["axes"]["page_size"] = 64; }), "line 7: workload.axes.page_size",
       "64"},
      {"unknown axis", line([](ojson& w) { w["axes"]["pages"] = 64; }), "line 7: workload.axes.pages", "64"},
      {"huge axis", line([](ojson& w) { w["axes"]["num_pages"] = 1ll << 40; }), "line 7: workload.axes.num_pages", ""},
      {"unknown input", line([](ojson& w) {
         w["inputs"]["kv_idx"] = {{"type", "random"}};
       }),
       "line 7: workload.inputs.kv_idx", ""},
      {"scalar without value", line([](ojson& w) { w["inputs"].erase("sm_scale"); }),
       "line 7: workload.inputs.sm_scale", ""},
      {"scalar as random", line([](ojson& w) {
         w["inputs"]["sm_scale"] = {{"type", "random"}};
       }),
       "line 7: workload.inputs.sm_scale.type", ""},
      {"unknown input type", line([](ojson& w) {
         w["inputs"]["q"] = {{"type", "zeros"}};
       }),
       "line 7: workload.inputs.q.type", "zeros"},
      {"safetensors without path", line([](ojson& w) {
         w["inputs"]["q"] = {{"type", "safetensors"}};
       }),
       "line 7: workload.inputs.q.path", ""},
      {"negative tolerance", line([](ojson& w) {
         w["tolerance"] = {{"max_atol", -1}};
       }),
       "line 7: workload.tolerance.max_atol", "-1"},
      {"constraint over axes", ps64_line(2, 1348, 4, 130), "line 7: constraints[0]", "4 == 3"},
      {"wrong definition",
       [] {
         ojson j = ojson::parse(ps64_line());
         j["definition"] = "other";
         return j.dump();
       }(),
       "line 7: definition", "other"},
      {"not an object", "[1, 2]", "line 7", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_KINDEX_ERROR(parse_workload_line(c.text, def, "data/w.jsonl", 7), "data/w.jsonl", c.field, c.value);
  }
  // Duplicate uuids in one file.
  EXPECT_KINDEX_ERROR(parse_workloads(ps64_line() + "\n\n" + ps64_line() + "\n", def, "w.jsonl"), "w.jsonl",
                      "line 3: uuid", "u-1");
}

// kindex's page-table extension: "lengths" on a random kv_indptr picks the generator's length distribution.
TEST(Loader, PageTableLengthsOnlyOnARandomKvIndptrWithAKnownName) {
  Definition def = ps64();
  auto line = [](ojson input, const char* name = "kv_indptr") {
    ojson j = ojson::parse(ps64_line());
    j["workload"]["inputs"][name] = input;
    return j.dump();
  };
  for (const char* d : {"exponential", "equal", "long_tail", "one_long"}) {
    Workload w = parse_workload_line(line({{"type", "random"}, {"lengths", d}}), def, "w.jsonl", 1);
    EXPECT_EQ(w.inputs.at("kv_indptr").lengths, d);
    EXPECT_EQ(w.inputs.at("kv_indices").lengths, "");
  }
  EXPECT_EQ(parse_workload_line(ps64_line(), def, "w.jsonl", 1).inputs.at("kv_indptr").lengths, "");

  struct Case {
    const char* what;
    std::string text;
    std::string field, value, problem;
  };
  std::vector<Case> cases = {
      {"unknown distribution", line({{"type", "random"}, {"lengths", "uniform"}}), "workload.inputs.kv_indptr.lengths",
       "\"uniform\"", "exponential, equal, long_tail, one_long"},
      {"not a string", line({{"type", "random"}, {"lengths", 3}}), "workload.inputs.kv_indptr.lengths", "3",
       "expected a string"},
      {"on kv_indices", line({{"type", "random"}, {"lengths", "equal"}}, "kv_indices"),
       "workload.inputs.kv_indices.lengths", "\"equal\"", "only kv_indptr"},
      {"on kv_last_page_len", line({{"type", "random"}, {"lengths", "equal"}}, "kv_last_page_len"),
       "workload.inputs.kv_last_page_len.lengths", "\"equal\"", "only kv_indptr"},
      {"on a float input", line({{"type", "random"}, {"lengths", "equal"}}, "q"), "workload.inputs.q.lengths",
       "\"equal\"", "only the page table's kv_indptr"},
      {"on safetensors", line({{"type", "safetensors"}, {"path", "t.safetensors"}, {"lengths", "equal"}}),
       "workload.inputs.kv_indptr.lengths", "\"equal\"", "not allowed for type safetensors"},
      {"on a scalar", line({{"type", "scalar"}, {"value", 0.1}, {"lengths", "equal"}}, "sm_scale"),
       "workload.inputs.sm_scale.lengths", "\"equal\"", "not allowed for type scalar"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Error e = test::catch_error([&] { parse_workload_line(c.text, def, "data/w.jsonl", 7); });
    EXPECT_EQ(e.where(), "data/w.jsonl");
    EXPECT_EQ(e.field(), "line 7: " + c.field);
    EXPECT_EQ(e.value(), c.value);
    EXPECT_NE(e.problem().find(c.problem), std::string::npos) << e.what();
  }
}

TEST(Loader, DatasetLayoutsAndErrorCollection) {
  test::TempDir dir;
  std::string def = ps64_json().dump();
  dir.write("fib/definitions/gqa_paged/gqa_paged_decode_h24_kv4_d128_ps64.json", def);
  dir.write("fib/workloads/gqa_paged/gqa_paged_decode_h24_kv4_d128_ps64.jsonl", ps64_line() + "\n");
  dir.write("fib/definitions/gqa_paged/broken.json", "{\"name\": ");
  dir.write("sol/problem_a/definition.json", test::read_file(sol_dir() / "definition.json"));
  dir.write("sol/problem_a/workload.jsonl", test::read_file(sol_dir() / "workload.jsonl"));

  std::vector<Error> errors;
  auto problems = load_dataset(dir.path(), &errors);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].definition.name, "gqa_paged_decode_h24_kv4_d128_ps64");
  EXPECT_EQ(problems[0].workloads.size(), 1u);
  EXPECT_EQ(fs::path(problems[0].workloads[0].base_dir), dir.path() / "fib");
  EXPECT_EQ(problems[1].workloads.size(), 16u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].where().find("broken.json"), std::string::npos);

  EXPECT_KINDEX_ERROR(load_dataset(dir.path()), "broken.json", "line 1", "");  // without collection: throws
  EXPECT_KINDEX_ERROR(load_dataset(dir.path() / "nothing"), "nothing", "", "");
  test::TempDir empty;
  EXPECT_KINDEX_ERROR(load_dataset(empty.path()), empty.path().string(), "", "");
}

}  // namespace
}  // namespace kindex::catalog
