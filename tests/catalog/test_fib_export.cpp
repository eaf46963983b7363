#include "catalog/fib_export.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "catalog/builtin.hpp"
#include "catalog/inputs.hpp"
#include "catalog/loader.hpp"
#include "catalog/page_table.hpp"
#include "catalog/safetensors.hpp"
#include "helpers.hpp"

namespace kindex::catalog {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kSeeds = {"gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h24_kv4_d128_ps64"};

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The exported dataset, loaded back as a user's dataset, gives every workload the page table kindex bench gives
// the bundled workload of the same uuid: the index inputs are read from the files, everything else is unchanged.
TEST(FibExport, ExportedWorkloadsCarryTheBundledPageTables) {
  test::TempDir dir;
  auto exported = export_flashinfer_bench(kSeeds, dir.path());
  ASSERT_EQ(exported.size(), 2u);
  EXPECT_EQ(exported[0].workloads + exported[1].workloads, 68u);

  std::vector<Problem> loaded = load_dataset(dir.path());
  ASSERT_EQ(loaded.size(), 2u);
  size_t compared = 0;
  for (const Problem& p : loaded) {
    const Problem bundled = builtin_problem(p.definition.name);
    EXPECT_TRUE(same_signature(p.definition, bundled.definition));
    // The definition file is the bundled one byte for byte (the harness runs its reference from it).
    EXPECT_EQ(test::read_file(dir.path() / "definitions" / "gqa_paged" / (p.definition.name + ".json")),
              std::string(*builtin_file("flashinfer-trace/definitions/gqa_paged/" + p.definition.name + ".json")));
    ASSERT_EQ(p.workloads.size(), bundled.workloads.size());
    for (size_t i = 0; i < p.workloads.size(); ++i) {
      const Workload& w = p.workloads[i];
      const Workload& b = bundled.workloads[i];
      EXPECT_EQ(w.uuid, b.uuid);
      EXPECT_EQ(w.axes, b.axes);
      GenerateOptions options;
      options.skip_random_floats = true;
      Inputs got = generate_inputs(p.definition, w, 1, options);
      Inputs want = generate_inputs(bundled.definition, b, 1, options);
      EXPECT_EQ(got.scalars, want.scalars);
      for (const TensorSpec& spec : p.definition.inputs) {
        if (is_floating(spec.dtype) || spec.is_scalar()) {
          EXPECT_EQ(w.inputs.at(spec.name).kind, b.inputs.at(spec.name).kind) << spec.name;
          continue;
        }
        const InputSpec& given = w.inputs.at(spec.name);
        EXPECT_EQ(given.kind, InputSpec::Kind::safetensors) << spec.name;
        EXPECT_EQ(given.path, page_table_blob_path(p.definition.name, w.uuid));
        EXPECT_TRUE(is_exported_page_table(p.definition.name, w.uuid, spec.name, given.path));
        ASSERT_TRUE(got.tensors.count(spec.name) && want.tensors.count(spec.name)) << spec.name;
        EXPECT_TRUE(same_bytes(got.tensors.at(spec.name), want.tensors.at(spec.name))) << w.uuid << " " << spec.name;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 48u * 2 + 20u * 3);  // ps1: kv_indptr, kv_indices; ps64: and kv_last_page_len
}

TEST(FibExport, TheFileNamesItsOriginAndOnlyItsOwnWorkloadMatches) {
  test::TempDir dir;
  export_flashinfer_bench({"gqa_paged_decode_h24_kv4_d128_ps64"}, dir.path());
  const Workload w = builtin_workloads("gqa_paged_decode_h24_kv4_d128_ps64").at(0);
  const std::string path = page_table_blob_path("gqa_paged_decode_h24_kv4_d128_ps64", w.uuid);
  SafetensorsFile f = read_safetensors(dir.path() / path);
  EXPECT_EQ(f.metadata.at("uuid"), w.uuid);
  EXPECT_EQ(f.tensors.size(), 3u);
  EXPECT_TRUE(is_exported_page_table("gqa_paged_decode_h24_kv4_d128_ps64", w.uuid, "kv_indices", "./" + path));
  // Another workload's file, another input, or a captured blob elsewhere is not kindex's table for this workload.
  EXPECT_FALSE(is_exported_page_table("gqa_paged_decode_h24_kv4_d128_ps64", "other-uuid", "kv_indices", path));
  EXPECT_FALSE(is_exported_page_table("gqa_paged_decode_h32_kv4_d128_ps1", w.uuid, "kv_indices", path));
  EXPECT_FALSE(is_exported_page_table("gqa_paged_decode_h24_kv4_d128_ps64", w.uuid, "q", path));
  EXPECT_FALSE(is_exported_page_table("gqa_paged_decode_h24_kv4_d128_ps64", w.uuid, "kv_indices",
                                      "./blob/workloads/gqa_paged/gqa_paged_decode_h24_kv4_d128_ps64/x.safetensors"));
}

// A table of another length distribution lives in a folder named after it, so the path alone (all a harness trace
// keeps) says which distribution made it; the default's path is unchanged.
TEST(FibExport, BlobPathsNameTheLengthDistribution) {
  const std::string def = "gqa_paged_decode_h24_kv4_d128_ps64", uuid = "8c1b-u";
  EXPECT_EQ(page_table_blob_path(def, uuid), "blob/kindex-page-tables/" + def + "/" + uuid + ".safetensors");
  EXPECT_EQ(page_table_blob_path(def, uuid, "exponential"), page_table_blob_path(def, uuid));
  EXPECT_EQ(page_table_blob_path(def, uuid, "long_tail"),
            "blob/kindex-page-tables/" + def + "/long_tail/" + uuid + ".safetensors");
  EXPECT_EQ(exported_page_table_lengths(def, uuid, "kv_indptr", page_table_blob_path(def, uuid)), "");
  for (const char* d : {"equal", "long_tail", "one_long"}) {
    EXPECT_EQ(exported_page_table_lengths(def, uuid, "kv_indices", "./" + page_table_blob_path(def, uuid, d)), d);
    EXPECT_EQ(exported_page_table_lengths(def, "other", "kv_indices", page_table_blob_path(def, uuid, d)),
              std::nullopt);
  }
  EXPECT_EQ(exported_page_table_lengths(def, uuid, "kv_indices",
                                        "blob/kindex-page-tables/" + def + "/zipf/" + uuid + ".safetensors"),
            std::nullopt);
  EXPECT_EQ(exported_page_table_lengths(def, uuid, "kv_indices",
                                        "blob/kindex-page-tables/" + def + "/exponential/" + uuid + ".safetensors"),
            std::nullopt);
}

// A user's dataset (here: a definition file and workloads of three length distributions plus one with its own
// captured table) exports through the same converter: the definition byte for byte, each generated page table in
// its distribution's folder and bit-identical to what the dataset's workload gets, a captured blob copied along.
TEST(FibExport, ADatasetExportsThroughTheSameConverter) {
  const std::string name = "gqa_paged_decode_h24_kv4_d128_ps64";
  const std::string definition_text(*builtin_file("flashinfer-trace/definitions/gqa_paged/" + name + ".json"));
  test::TempDir src, out;
  src.write("definitions/gqa_paged/" + name + ".json", definition_text);
  auto line = [&](const std::string& uuid, const nlohmann::json& indptr) {
    nlohmann::json inputs = {{"kv_indptr", indptr}, {"sm_scale", {{"type", "scalar"}, {"value", 0.0883883}}}};
    nlohmann::json w = {{"uuid", uuid},
                        {"axes", {{"batch_size", 8}, {"num_pages", 900}, {"len_indptr", 9}, {"num_kv_indices", 700}}},
                        {"inputs", inputs}};
    return nlohmann::json{{"definition", name}, {"workload", w}}.dump() + "\n";
  };
  std::string lines = line("u-default", {{"type", "random"}});
  for (const char* d : {"equal", "long_tail", "one_long"})
    lines += line(std::string("u-") + d, {{"type", "random"}, {"lengths", d}});
  // A workload with an input of its own: kv_indptr from a file of the dataset (only its bytes matter here).
  PageTable captured = generate_page_table(8, 900, 700, 64, 99);
  Tensor indptr(DType::i32, {9});
  std::memcpy(indptr.data(), captured.kv_indptr.data(), 9 * 4);
  std::filesystem::create_directories(src.path() / "blob" / "mine");
  write_safetensors(src.path() / "blob" / "mine" / "t.safetensors", {{"kv_indptr", indptr}});
  lines += line("u-captured", {{"type", "safetensors"}, {"path", "blob/mine/t.safetensors"}});
  src.write("workloads/gqa_paged/" + name + ".jsonl", lines);

  auto exported = export_flashinfer_bench_dataset(src.path(), out.path());
  ASSERT_EQ(exported.size(), 1u);
  EXPECT_EQ(exported[0].name, name);
  EXPECT_EQ(exported[0].workloads, 5u);
  EXPECT_EQ(test::read_file(out.path() / "definitions" / "gqa_paged" / (name + ".json")), definition_text);
  EXPECT_TRUE(std::filesystem::is_regular_file(out.path() / "blob" / "mine" / "t.safetensors"));

  const std::vector<Problem> given = load_dataset(src.path()), loaded = load_dataset(out.path());
  ASSERT_EQ(loaded.size(), 1u);
  ASSERT_EQ(loaded[0].workloads.size(), 5u);
  GenerateOptions options;
  options.skip_random_floats = true;
  for (size_t i = 0; i < 5; ++i) {
    const Workload& w = loaded[0].workloads[i];
    const Workload& g = given[0].workloads[i];
    SCOPED_TRACE(w.uuid);
    const std::string lengths = g.inputs.at("kv_indptr").lengths;
    if (w.uuid != "u-captured") {
      for (const char* input : {"kv_indptr", "kv_indices", "kv_last_page_len"}) {
        EXPECT_EQ(w.inputs.at(input).kind, InputSpec::Kind::safetensors);
        EXPECT_EQ(w.inputs.at(input).path, page_table_blob_path(name, w.uuid, lengths));
        EXPECT_EQ(exported_page_table_lengths(name, w.uuid, input, w.inputs.at(input).path), lengths);
      }
      SafetensorsFile f = read_safetensors(out.path() / page_table_blob_path(name, w.uuid, lengths));
      EXPECT_EQ(f.metadata.at("lengths"), lengths.empty() ? "exponential" : lengths);
    } else {
      EXPECT_EQ(w.inputs.at("kv_indptr").path, "blob/mine/t.safetensors");
    }
    Inputs got = generate_inputs(loaded[0].definition, w, 1, options);
    Inputs want = generate_inputs(given[0].definition, g, 1, options);
    for (const char* input : {"kv_indptr", "kv_indices", "kv_last_page_len"})
      EXPECT_TRUE(same_bytes(got.tensors.at(input), want.tensors.at(input))) << input;
  }
  // Only the named definitions; a name the dataset lacks, the dataset as its own output, a definition that is not
  // a decode one: errors naming what is wrong.
  test::TempDir out2;
  EXPECT_EQ(export_flashinfer_bench_dataset(src.path(), out2.path(), {name}).size(), 1u);
  EXPECT_KINDEX_ERROR(export_flashinfer_bench_dataset(src.path(), out2.path(), {"gqa_paged_decode_h8_kv1_d64_ps1"}),
                      "export", "definition", "h8_kv1");
  EXPECT_KINDEX_ERROR(export_flashinfer_bench_dataset(src.path(), src.path()), "export", "--out",
                      src.path().string());
  test::TempDir sol;
  sol.write("p/definition.json", test::read_file(std::filesystem::path(KINDEX_SOURCE_DIR) / "definitions" /
                                                 "sol-execbench" / "L2" /
                                                 std::string(kSolGqaRopeBackward) / "definition.json"));
  EXPECT_KINDEX_ERROR(export_flashinfer_bench_dataset(sol.path(), out2.path()), "export", "definition", "003_");
}

TEST(FibExport, RefusesWhatIsNotABundledDecodeProblemWithWorkloads) {
  test::TempDir dir;
  EXPECT_KINDEX_ERROR(export_flashinfer_bench({"no_such_definition"}, dir.path()), "export", "definition",
                      "no_such_definition");
  EXPECT_KINDEX_ERROR(export_flashinfer_bench({std::string(kSolGqaRopeBackward)}, dir.path()), "export", "definition",
                      "003_");
  // A decode name the family generates on request has no bundled workloads to export.
  EXPECT_KINDEX_ERROR(export_flashinfer_bench({"gqa_paged_decode_h8_kv2_d64_ps16"}, dir.path()), "export",
                      "definition", "h8_kv2");
}

}  // namespace
}  // namespace kindex::catalog
