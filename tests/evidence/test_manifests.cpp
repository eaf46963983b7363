// Manifest digests (protocols.md's pinned vectors, the seed pages' canonical manifests), strict readers, schema
// validation of the KernelIndex examples, and duration normalisation.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/manifest.hpp"
#include "evidence/reader.hpp"
#include "evidence/schema.hpp"
#include "support/paths.hpp"

using namespace kindex::evidence;
using nlohmann::json;

namespace {

std::string examples_dir() { return kindex::test::data_dir() + "/kernelindex/examples"; }

// The canonical manifest block of a seed page: {"run":..., "protocol":..., "environment":...}.
json seed_manifests(const std::string& file) {
  const std::string text = read_file_bytes(kindex::test::data_dir() + "/seeds/" + file);
  const auto begin = text.find("{\n  \"run\"");
  const auto end = text.find("\nCite this record");
  EXPECT_NE(begin, std::string::npos);
  EXPECT_NE(end, std::string::npos);
  return parse_json_strict(text.substr(begin, end - begin), file);
}

// Runs f and returns the kindex::Error message it throws ("" when it does not throw).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kindex::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Digest, PinnedExampleVectors) {
  const std::pair<const char*, const char*> pinned[] = {
      {"operation-spec.yaml", "sha256:7a3b25630f0628b21ed74b6adb588d28f7e29191f9038bed6f56ed393deefb5b"},
      {"workload-case.yaml", "sha256:944ceb3a7d7d4a4c47f1f8ed239363f4be78a2a90293b4325fb18a274cf97aa3"},
      {"implementation-revision.yaml", "sha256:c560b43111f315d75a81c1cf194c827b1c294110fe5b20ad2d4467c09c24809e"},
      {"benchmark-protocol.yaml", "sha256:6ac212f99724757d058e7a7f440314debd2fed235c5178bc006b62c0d5e0d295"},
      {"execution-environment.yaml", "sha256:46cf7b24b586c71505152d0103b9e84101de1ac5b66cdd76aabc88356e93db79"},
  };
  for (const auto& [file, digest] : pinned) EXPECT_EQ(manifest_digest(read_manifest_file(examples_dir() + "/" + file)), digest) << file;
  const json project = parse_json_strict(
      R"({"apiVersion":"kernelindex.dev/v1alpha1","kind":"SoftwareProject","spec":{"name":"Vector Project","repository":"https://example.invalid/vector/project"}})",
      "vector");
  EXPECT_EQ(manifest_digest(project), "sha256:bea60af06f12216679b113d6624c5293d59bef2104ccc27cd33c992d124e039d");
}

TEST(Digest, ExampleRunReferencesThePinnedDigests) {
  // benchmark-run.yaml cites the other examples by digest: recomputing them closes the loop.
  const json run = read_manifest_file(examples_dir() + "/benchmark-run.yaml");
  EXPECT_EQ(run["spec"]["implementationDigest"], manifest_digest(read_manifest_file(examples_dir() + "/implementation-revision.yaml")));
  EXPECT_EQ(run["spec"]["workloadDigest"], manifest_digest(read_manifest_file(examples_dir() + "/workload-case.yaml")));
  EXPECT_EQ(run["spec"]["protocolDigest"], manifest_digest(read_manifest_file(examples_dir() + "/benchmark-protocol.yaml")));
  EXPECT_EQ(run["spec"]["environmentDigest"], manifest_digest(read_manifest_file(examples_dir() + "/execution-environment.yaml")));
  EXPECT_EQ(read_manifest_file(examples_dir() + "/workload-case.yaml")["spec"]["operationSpecDigest"],
            manifest_digest(read_manifest_file(examples_dir() + "/operation-spec.yaml")));
  // Likewise the serving examples.
  const json serving = read_manifest_file(examples_dir() + "/serving-run.yaml");
  EXPECT_EQ(serving["spec"]["modelDigest"], manifest_digest(read_manifest_file(examples_dir() + "/model-revision.yaml")));
  EXPECT_EQ(serving["spec"]["configurationDigest"],
            manifest_digest(read_manifest_file(examples_dir() + "/serving-configuration.yaml")));
  EXPECT_EQ(serving["spec"]["workloadDigest"], manifest_digest(read_manifest_file(examples_dir() + "/serving-workload.yaml")));
  EXPECT_EQ(read_manifest_file(examples_dir() + "/serving-configuration.yaml")["spec"]["stackDigest"],
            manifest_digest(read_manifest_file(examples_dir() + "/serving-stack-revision.yaml")));
}

TEST(Digest, SeedPageManifests) {
  const json s000 = seed_manifests("000_f7b51b9a62efe8a1.txt");
  EXPECT_EQ(manifest_digest(s000["protocol"]), "sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095");
  EXPECT_EQ(manifest_digest(s000["protocol"]), s000["run"]["spec"]["protocolDigest"]);
  EXPECT_EQ(manifest_digest(s000["environment"]), s000["run"]["spec"]["environmentDigest"]);
  EXPECT_EQ(manifest_digest(s000["run"]).substr(0, 30), "sha256:e49a02d4bf1f00e234e9e74");  // as the page shows it
  const json s004 = seed_manifests("004_36d12c54e24e282a.txt");
  EXPECT_EQ(manifest_digest(s004["protocol"]), s004["run"]["spec"]["protocolDigest"]);
  EXPECT_EQ(manifest_digest(s004["protocol"]), "sha256:2964c5c4ed9cb0dcdc0f74674035bc71bf5e66620939e38441060f76434ed3e5");
  EXPECT_EQ(manifest_digest(s004["environment"]), s004["run"]["spec"]["environmentDigest"]);
  EXPECT_EQ(manifest_digest(s004["run"]).substr(0, 30), "sha256:fa4d980817af8b4b1ef6af0");
  for (const auto& seed : {s000, s004})
    for (const char* part : {"run", "protocol", "environment"}) EXPECT_NO_THROW(validate_manifest(seed[part], part));
}

TEST(Digest, MetadataIsExcludedAndSupportListsAreSets) {
  json m = read_manifest_file(examples_dir() + "/implementation-revision.yaml");
  const std::string digest = manifest_digest(m);
  m["metadata"]["title"] = "another title";
  EXPECT_EQ(manifest_digest(m), digest);
  m["spec"]["support"]["axes"] = json::array({"hidden == 4096", "tokens >= 1", "tokens >= 1"});
  EXPECT_EQ(manifest_digest(m), digest);
  m["spec"]["support"]["dtypes"] = json::array({"fp16"});
  EXPECT_NE(manifest_digest(m), digest);
}

TEST(Digest, DurationsBecomeIntegerNanoseconds) {
  EXPECT_EQ(parse_duration_ns("8 us", "t", "f"), 8000);
  EXPECT_EQ(parse_duration_ns("8us", "t", "f"), 8000);
  EXPECT_EQ(parse_duration_ns("1.5 ms", "t", "f"), 1500000);
  EXPECT_EQ(parse_duration_ns("250ns", "t", "f"), 250);
  EXPECT_EQ(parse_duration_ns("2 s", "t", "f"), 2000000000);
  EXPECT_EQ(parse_duration_ns("3 \xC2\xB5s", "t", "f"), 3000);
  EXPECT_EQ(parse_duration_ns("0.000001 ms", "t", "f"), 1);
  EXPECT_EQ(parse_duration_ns("1.2500 us", "t", "f"), 1250);
  EXPECT_EQ(parse_duration_ns("007 ns", "t", "f"), 7);
  const std::string ambiguous = error_of([] { parse_duration_ns("0.0000005 ms", "run.yaml", "/spec/timing/latencyNs/median"); });
  EXPECT_NE(ambiguous.find("run.yaml"), std::string::npos);
  EXPECT_NE(ambiguous.find("ambiguous"), std::string::npos) << ambiguous;
  for (const char* bad : {"1.5", "ms", "1.5 min", "1. ms", "-1 ns", "1  ns", "9007199254740992 ns", "99999999999999999999 s"})
    EXPECT_THROW(parse_duration_ns(bad, "t", "f"), kindex::Error) << bad;

  // A run written with duration strings digests like the same run written in integer nanoseconds.
  json with_units = read_manifest_file(examples_dir() + "/benchmark-run.yaml");
  json in_ns = with_units;
  with_units["spec"]["timing"]["latencyNs"]["median"] = "8.12 us";
  with_units["spec"]["timing"]["latencyNs"]["confidence95"] = json::array({"8095ns", "8.151 us"});
  EXPECT_EQ(manifest_digest(with_units), manifest_digest(in_ns));
  json protocol = read_manifest_file(examples_dir() + "/benchmark-protocol.yaml");
  protocol["spec"]["measurement"]["warmupDuration"] = "25 ms";
  EXPECT_EQ(normalize_manifest(protocol)["spec"]["measurement"]["warmupDuration"], 25000000);
}

TEST(Reader, YamlScalarsResolveLikeKernelIndex) {
  const json v = parse_yaml(R"(
at: 2026-08-01T12:00:00Z
date: 2026-08-01
version: "1.0"
float: 1.0
int: 42
neg: -7
big: 18446744073709551616
exp: 1e3
octal: 0o17
hex: 0x1F
t: true
f: False
n: ~
empty:
yes_is_text: yes
quoted_true: "true"
single: 'it''s'
block: |
  two
  lines
flow: {a: [1, 2], b: x}
)", "scalars.yaml");
  EXPECT_EQ(v["at"], "2026-08-01T12:00:00Z");
  EXPECT_EQ(v["date"], "2026-08-01");
  EXPECT_EQ(v["version"], "1.0");
  EXPECT_TRUE(v["float"].is_number_float());
  EXPECT_EQ(v["float"].get<double>(), 1.0);
  EXPECT_EQ(v["int"], 42);
  EXPECT_EQ(v["neg"], -7);
  EXPECT_EQ(v["big"].get<double>(), 18446744073709551616.0);
  EXPECT_EQ(v["exp"].get<double>(), 1000.0);
  EXPECT_EQ(v["octal"], 15);
  EXPECT_EQ(v["hex"], 31);
  EXPECT_EQ(v["t"], true);
  EXPECT_EQ(v["f"], false);
  EXPECT_TRUE(v["n"].is_null());
  EXPECT_TRUE(v["empty"].is_null());
  EXPECT_EQ(v["yes_is_text"], "yes");
  EXPECT_EQ(v["quoted_true"], "true");
  EXPECT_EQ(v["single"], "it's");
  EXPECT_EQ(v["block"], "two\nlines\n");
  EXPECT_EQ(v["flow"], json({{"a", {1, 2}}, {"b", "x"}}));
}

TEST(Reader, RefusesWhatAManifestMustNotContain) {
  const std::string dup = error_of([] { parse_yaml("a: 1\nb:\n  c: 1\n  c: 2\n", "dup.yaml"); });
  EXPECT_NE(dup.find("dup.yaml"), std::string::npos) << dup;
  EXPECT_NE(dup.find("line 4, column 3"), std::string::npos) << dup;
  EXPECT_NE(dup.find("duplicate"), std::string::npos) << dup;
  const std::string dup_json = error_of([] { parse_json_strict("{\"a\": 1,\n \"a\": 2}", "dup.json"); });
  EXPECT_NE(dup_json.find("line 2"), std::string::npos) << dup_json;
  EXPECT_NE(dup_json.find("duplicate"), std::string::npos) << dup_json;
  EXPECT_NE(error_of([] { parse_yaml("a: &x 1\nb: *x\n", "alias.yaml"); }).find("anchors"), std::string::npos);
  EXPECT_NE(error_of([] { parse_yaml("a: !!str 1\n", "tag.yaml"); }).find("tags"), std::string::npos);
  EXPECT_NE(error_of([] { parse_yaml("a: 1\n---\nb: 2\n", "multi.yaml"); }).find("more than one"), std::string::npos);
  EXPECT_NE(error_of([] { parse_yaml("a: .inf\n", "inf.yaml"); }).find("NaN"), std::string::npos);
  EXPECT_NE(error_of([] { parse_yaml("a: [1, 2\n", "broken.yaml"); }).find("YAML syntax error"), std::string::npos);
  EXPECT_NE(error_of([] { parse_yaml("? [a]\n: 1\n", "complex.yaml"); }).find("keys"), std::string::npos);
  EXPECT_NE(error_of([] { parse_yaml("", "empty.yaml"); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([] { parse_json_strict("{\"a\": 1e999}", "big.json"); }).find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_json_strict("{\"a\": [1,}", "bad.json"); }).find("bad.json"), std::string::npos);
  EXPECT_NE(error_of([] { parse_yaml(std::string(500, '[') + std::string(500, ']'), "deep.yaml"); }).find("nesting"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_json_strict(std::string(500, '[') + std::string(500, ']'), "deep.json"); }).find("nesting"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_manifest_file("/nonexistent/x.yaml"); }).find("cannot open"), std::string::npos);
}

TEST(Schema, EveryValidExamplePasses) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples_dir())) {
    if (entry.path().extension() != ".yaml") continue;
    const json m = read_manifest_file(entry.path().string());
    const auto problems = check_manifest_schema(m);
    for (const auto& p : problems) ADD_FAILURE() << entry.path() << ": " << p.pointer << " " << p.value << " " << p.rule;
    EXPECT_NO_THROW(validate_manifest(m, entry.path().string()));
    ++checked;
  }
  EXPECT_EQ(checked, 13);
  EXPECT_EQ(schema_kinds().size(), 13u);
}

TEST(Schema, InvalidExamplesFailWithClearMessages) {
  const auto load_and_validate = [](const std::string& name) {
    return error_of([&] {
      const std::string path = examples_dir() + "/invalid/" + name;
      validate_manifest(read_manifest_file(path), path);
    });
  };
  // Each invalid file, and what its message must name: where, the value, the rule broken.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"ambiguous-duration.yaml", {"/spec/timing/latencyNs/median", "0.0000005 ms", "ambiguous duration"}},
      {"bad-digest.yaml",
       {"/spec/operationSpecDigest", "md5:abc123", "does not match pattern ^sha256:[0-9a-f]{64}$"}},
      {"duplicate-key.yaml", {"duplicate-key.yaml", "line 8, column 3", "name", "duplicate mapping key"}},
      {"unknown-field.yaml", {"/spec/popularity", "9001", "unknown property"}},
  };
  for (const auto& [file, needles] : cases) {
    const std::string message = load_and_validate(file);
    for (const auto& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << file << ": " << needle << " not in " << message;
  }
}

TEST(Schema, RulesNameThePointerValueAndRule) {
  json m = read_manifest_file(examples_dir() + "/execution-environment.yaml");
  m["spec"]["software"]["driver"] = nullptr;
  auto problems = check_manifest_schema(m);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].pointer, "/spec/software/driver");
  EXPECT_EQ(problems[0].value, "null");
  EXPECT_NE(problems[0].rule.find("null is not allowed"), std::string::npos);

  m = read_manifest_file(examples_dir() + "/execution-environment.yaml");
  m["spec"]["hardware"].erase("product");
  m["spec"]["hardware"]["memoryBytes"] = -5;
  m["spec"]["hardware"]["count"] = 1.5;
  problems = check_manifest_schema(m);
  ASSERT_EQ(problems.size(), 3u);
  std::set<std::string> seen;
  for (const auto& p : problems) seen.insert(p.pointer + " " + p.rule);
  EXPECT_TRUE(seen.count("/spec/hardware/product required property missing"));
  EXPECT_TRUE(seen.count("/spec/hardware/memoryBytes must be greater than 0"));
  EXPECT_TRUE(seen.count("/spec/hardware/count wrong type (expected integer)"));

  json run = read_manifest_file(examples_dir() + "/benchmark-run.yaml");
  run["spec"]["timing"]["latencyNs"]["median"] = "fast";
  problems = check_manifest_schema(run);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].rule.find("matches none of the allowed forms"), std::string::npos) << problems[0].rule;
  run["spec"]["timing"]["latencyNs"]["median"] = 8120;
  run["spec"]["observedAt"] = "2026-02-30T12:00:00Z";
  EXPECT_EQ(check_manifest_schema(run).at(0).pointer, "/spec/observedAt");

  EXPECT_NE(error_of([] { validate_manifest(json{{"kind", "Bogus"}}, "x"); }).find("unknown manifest kind"), std::string::npos);
  EXPECT_NE(error_of([] { validate_manifest(json::array(), "x"); }).find("object"), std::string::npos);
}

// Metadata text cut to the schema's limits counts characters, never splits a UTF-8 sequence, and says it was cut.
TEST(Manifests, ClipTextCutsWholeCharacters) {
  EXPECT_EQ(clip_text("short", 200), "short");
  EXPECT_EQ(clip_text("abcdef", 6), "abcdef");
  EXPECT_EQ(clip_text("abcdefg", 6), "abcde\u2026");
  EXPECT_EQ(clip_text("\u00e9\u00e9\u00e9\u00e9", 3), "\u00e9\u00e9\u2026");  // 2-byte characters
  EXPECT_EQ(clip_text("ab\u20ac\u20accd", 4), "ab\u20ac\u2026");               // a 3-byte one kept whole
  EXPECT_EQ(clip_text("abc", 0), "");
  EXPECT_EQ(clip_text(std::string(500, 't'), kMaxTitleChars).size(), 199u + 3u);  // 199 ASCII + one 3-byte "…"
}
