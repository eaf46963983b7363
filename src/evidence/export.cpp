#include "evidence/export.hpp"

#include <zstd.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/keys.hpp"
#include "evidence/reader.hpp"

namespace kindex::evidence {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxLine = std::size_t{64} << 20;

struct DStreamDeleter {
  void operator()(ZSTD_DStream* s) const { ZSTD_freeDStream(s); }
};

}  // namespace

bool is_export_table(const std::string& table) {
  return std::find(kExportTables.begin(), kExportTables.end(), table) != kExportTables.end();
}

ExportRow parse_export_line(std::string_view line, const std::string& where) {
  nlohmann::json object = parse_json_strict(line, where);
  if (!object.is_object()) throw Error(where, "", "", "an export line is a {\"table\", \"row\"} object");
  for (const auto& [key, _] : object.items())
    if (key != "table" && key != "row") throw Error(where, key, "", "unknown key in an export line (expected table, row)");
  if (!object.contains("table") || !object["table"].is_string()) throw Error(where, "table", "", "missing or not a string");
  std::string table = object["table"].get<std::string>();
  if (table.empty()) throw Error(where, "table", table, "empty table name");
  if (!object.contains("row") || !object["row"].is_object()) throw Error(where, "row", "", "missing or not an object");
  return {std::move(table), std::move(object["row"])};
}

void for_each_export_line(const std::string& path,
                          const std::function<void(std::string_view line, std::size_t line_number)>& on_line) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "", "", "cannot open file");
  std::vector<char> input(ZSTD_DStreamInSize()), output(ZSTD_DStreamOutSize());
  std::string pending;
  std::size_t line_number = 0;
  const auto take_lines = [&](const char* data, std::size_t size) {
    pending.append(data, size);
    std::size_t start = 0;
    for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(pending.data() + start, nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      ++line_number;
      if (!line.empty()) on_line(line, line_number);
    }
    pending.erase(0, start);
    if (pending.size() > kMaxLine)
      throw Error(path, "line " + std::to_string(line_number + 1), "", "line longer than 64 MiB");
  };

  // zstd frames start with 28 B5 2F FD; anything else is read as plain JSON lines.
  in.read(input.data(), 4);
  std::size_t got = static_cast<std::size_t>(in.gcount());
  const bool zstd = got == 4 && static_cast<unsigned char>(input[0]) == 0x28 &&
                    static_cast<unsigned char>(input[1]) == 0xb5 && static_cast<unsigned char>(input[2]) == 0x2f &&
                    static_cast<unsigned char>(input[3]) == 0xfd;
  if (!zstd) {
    take_lines(input.data(), got);
    while (in.read(input.data(), static_cast<std::streamsize>(input.size())) || in.gcount() > 0)
      take_lines(input.data(), static_cast<std::size_t>(in.gcount()));
  } else {
    std::unique_ptr<ZSTD_DStream, DStreamDeleter> stream(ZSTD_createDStream());
    if (!stream) throw std::runtime_error("zstd: cannot create a decompression stream");
    ZSTD_initDStream(stream.get());
    std::size_t last_result = 0;
    bool first = true;
    while (true) {
      if (!first) {
        in.read(input.data(), static_cast<std::streamsize>(input.size()));
        got = static_cast<std::size_t>(in.gcount());
        if (got == 0) break;
      }
      first = false;
      ZSTD_inBuffer in_buf{input.data(), got, 0};
      // Decode until this chunk is consumed and the decoder has nothing more to give (a full output buffer may
      // mean more is pending); last_result == 0 marks the end of a complete frame.
      while (true) {
        ZSTD_outBuffer out_buf{output.data(), output.size(), 0};
        last_result = ZSTD_decompressStream(stream.get(), &out_buf, &in_buf);
        if (ZSTD_isError(last_result))
          throw Error(path, "", "", std::string("corrupt zstd stream: ") + ZSTD_getErrorName(last_result));
        take_lines(output.data(), out_buf.pos);
        if (in_buf.pos == in_buf.size && (out_buf.pos < out_buf.size || last_result == 0)) break;
      }
    }
    if (last_result != 0) throw Error(path, "", "", "truncated zstd stream");
  }
  if (!pending.empty()) on_line(pending, ++line_number);
}

void for_each_export_row(const std::string& path, const std::function<void(ExportRow&&)>& on_row) {
  for_each_export_line(path, [&](std::string_view line, std::size_t n) {
    on_row(parse_export_line(line, path + ":" + std::to_string(n)));
  });
}

const std::vector<nlohmann::json>& ExportData::rows(const std::string& table) const {
  static const std::vector<nlohmann::json> none;
  const auto it = tables.find(table);
  return it == tables.end() ? none : it->second;
}

ExportData read_export(const std::string& path) {
  ExportData data;
  for_each_export_row(path, [&](ExportRow&& r) {
    if (is_export_table(r.table)) {
      data.tables[r.table].push_back(std::move(r.row));
    } else {
      ++data.skipped_tables[r.table];
    }
  });
  return data;
}

namespace {

std::string string_field(const nlohmann::json& row, const char* key) {
  return row.contains(key) && row[key].is_string() ? row[key].get<std::string>() : std::string();
}

class Verifier {
 public:
  VerifyReport report;

  // Compares a stored column with its recomputation; a failure to recompute counts as a mismatch.
  void compare(const std::string& table, const nlohmann::json& row, const std::string& column,
               const std::function<std::string()>& recompute, const std::string& stored) {
    std::string computed;
    try {
      computed = recompute();
    } catch (const std::exception& e) {
      computed = std::string("<error: ") + e.what() + ">";
    }
    auto& check = report.columns[column];
    if (!stored.empty() && computed == stored) {
      ++check.matched;
    } else {
      ++check.mismatched;
      report.mismatches.push_back(table + " " + string_field(row, "id") + " " + column + ": stored " +
                                  (stored.empty() ? "<missing>" : stored) + ", computed " + computed);
    }
  }

  // Compares each column a row states with the value its manifest gives (a column not stated is not checked: an
  // importer fills it from the manifest).
  void compare_facts(const std::string& table, const nlohmann::json& row,
                     const std::vector<std::pair<std::string, json>>& facts) {
    for (const auto& [column, computed] : facts) {
      if (!row.contains(column)) continue;
      const json& stated = row[column];
      auto& check = report.columns[table + "." + column];
      if (same_fact(column, stated, computed)) {
        ++check.matched;
      } else {
        ++check.mismatched;
        report.mismatches.push_back(table + " " + string_field(row, "id") + " " + column + ": stated " + stated.dump() +
                                    ", its manifest gives " + computed.dump());
      }
    }
  }

  // Every measurement row of `table` against the measurements its run's manifest states.
  void compare_measurements(const std::string& table, const std::vector<json>& rows,
                            const std::map<std::string, std::vector<RunMeasurement>>& by_run) {
    for (const auto& row : rows) {
      const std::string id = string_field(row, "id");
      const auto it = by_run.find(string_field(row, "runId"));
      const RunMeasurement* expected = nullptr;
      if (it != by_run.end()) {
        for (const auto& m : it->second)
          if (m.metric == string_field(row, "metric") && m.statistic == string_field(row, "statistic")) expected = &m;
      }
      const auto check = [&](const char* column, const json& computed) {
        auto& c = report.columns[table + "." + column];
        const json stated = row.contains(column) ? row[column] : json();
        if (expected && same_fact(column, stated, computed)) {
          ++c.matched;
        } else {
          ++c.mismatched;
          report.mismatches.push_back(table + " " + id + " " + column + ": stated " + stated.dump() + ", " +
                                      (expected ? "run manifest gives " + computed.dump()
                                                : std::string("the run manifest has no such measurement")));
        }
      };
      check("value", expected ? json(expected->value) : json());
      check("unit", expected ? json(expected->unit) : json());
      check("sampleCount", expected && expected->sample_count ? json(*expected->sample_count) : json());
    }
  }
};

// Serving evidence: each table's manifest digest, the columns each row restates from its manifest, the digests a
// configuration and a run name against the rows they are filed under, and every serving measurement.
void verify_serving(Verifier& v, const ExportData& data) {
  std::map<std::string, std::map<std::string, std::string>> digests;  // table -> row id -> recomputed digest
  std::map<std::string, std::vector<RunMeasurement>> measurements;     // serving run id -> its manifest's
  // The digest `manifest_key` a row of `table_of_row` names, against the row of `table` its `id_key` files it under.
  const auto named = [&](const char* table_of_row, const nlohmann::json& row, const char* manifest_key, const char* table,
                         const char* id_key) {
    const auto ptr = nlohmann::json::json_pointer(std::string("/manifest/spec/") + manifest_key);
    const std::string stated = row.contains(ptr) && row.at(ptr).is_string() ? row.at(ptr).get<std::string>() : "";
    v.compare(table_of_row, row, std::string(table_of_row) + ".manifest.spec." + manifest_key,
              [&] {
                const auto& in = digests[table];
                const auto it = in.find(string_field(row, id_key));
                if (it == in.end()) throw std::runtime_error(std::string(id_key) + " names no " + table + " row");
                return it->second;
              },
              stated);
  };
  for (const char* table : {"model_revisions", "serving_stack_revisions", "serving_configurations", "serving_workloads",
                            "serving_runs"}) {
    const std::string column = serving_digest_column(table);
    for (const auto& row : data.rows(table)) {
      const auto digest = [&] {
        if (!row.contains("manifest")) throw std::runtime_error("no manifest");
        return manifest_digest(row["manifest"]);
      };
      v.compare(table, row, std::string(table) + "." + column, digest, string_field(row, column.c_str()));
      try {
        digests[table][string_field(row, "id")] = digest();
        v.compare_facts(table, row, serving_row_facts(table, row["manifest"]));
        if (std::string(table) == "serving_runs") measurements[string_field(row, "id")] = run_measurements(row["manifest"]);
      } catch (const std::exception&) {  // counted as a mismatch of the digest column above
      }
      if (std::string(table) == "serving_configurations") named(table, row, "stackDigest", "serving_stack_revisions", "stackRevisionId");
      if (std::string(table) == "serving_runs") {
        named(table, row, "modelDigest", "model_revisions", "modelRevisionId");
        named(table, row, "configurationDigest", "serving_configurations", "configurationId");
        named(table, row, "workloadDigest", "serving_workloads", "workloadId");
      }
    }
  }
  v.compare_measurements("serving_measurements", data.rows("serving_measurements"), measurements);
}

}  // namespace

// Longer than ~150 lines on purpose: the export's tables are verified in dependency order (operations, workloads,
// implementations, then runs and their measurements), each pass filling the recomputed digests the next one's keys
// are checked against; the maps that carry them live here, one function over the whole export.
VerifyReport verify_export(const ExportData& data) {
  Verifier v;
  for (const auto& [table, rows] : data.tables) v.report.row_counts[table] = rows.size();
  v.report.skipped_tables = data.skipped_tables;

  // Recomputed digests by row id, used to recompute the keys that refer to other rows.
  std::map<std::string, std::string> operation_digest, workload_digest, implementation_digest;
  std::map<std::string, const nlohmann::json*> workload_by_id;
  std::map<std::string, std::string> run_comparison_key;
  std::map<std::string, std::vector<RunMeasurement>> run_measurement_rows;
  std::map<std::string, json> source_size_by_digest;  // implementation source digest -> stated sizeBytes
  const auto digest_of = [](const nlohmann::json& row, const char* key) {
    if (!row.contains(key)) throw std::runtime_error(std::string("no ") + key);
    return manifest_digest(row[key]);
  };
  const auto remember = [](std::map<std::string, std::string>& into, const nlohmann::json& row,
                           const std::function<std::string()>& f) {
    try {
      into[string_field(row, "id")] = f();
    } catch (const std::exception&) {
    }
  };

  for (const auto& row : data.rows("operations")) {
    remember(operation_digest, row, [&] { return digest_of(row, "manifest"); });
    v.compare("operations", row, "semanticDigest", [&] { return digest_of(row, "manifest"); }, string_field(row, "semanticDigest"));
  }
  for (const auto& row : data.rows("workloads")) {
    workload_by_id[string_field(row, "id")] = &row;
    remember(workload_digest, row, [&] { return digest_of(row, "manifest"); });
    v.compare("workloads", row, "workloadDigest", [&] { return digest_of(row, "manifest"); }, string_field(row, "workloadDigest"));
  }
  for (const auto& row : data.rows("implementations")) {
    if (row.contains("manifest")) {
      const auto ptr = json::json_pointer("/manifest/spec/source");
      if (row.contains(ptr) && row.at(ptr).is_object() && row.at(ptr).contains("contentDigest"))
        source_size_by_digest[row.at(ptr)["contentDigest"].dump()] = row.at(ptr).value("sizeBytes", json());
    }
    remember(implementation_digest, row, [&] { return digest_of(row, "manifest"); });
    v.compare("implementations", row, "implementationDigest", [&] { return digest_of(row, "manifest"); },
              string_field(row, "implementationDigest"));
  }
  for (const auto& row : data.rows("benchmark_runs")) {
    const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json& m = row.contains("manifest") && row["manifest"].is_object() ? row["manifest"] : empty;
    const auto part = [&](const char* key) -> const nlohmann::json& {
      if (!m.contains(key)) throw std::runtime_error(std::string("manifest has no ") + key);
      return m[key];
    };
    const auto workload = [&]() -> const nlohmann::json& {
      const auto it = workload_by_id.find(string_field(row, "workloadId"));
      if (it == workload_by_id.end()) throw std::runtime_error("workloadId names no workload row");
      return *it->second;
    };
    const auto lookup = [&](const std::map<std::string, std::string>& in, const std::string& id, const char* what) {
      const auto it = in.find(id);
      if (it == in.end()) throw std::runtime_error(std::string("no ") + what + " row " + id);
      return it->second;
    };
    // A stored value the run manifest states ("" when absent: counted as a mismatch, never thrown here).
    const auto run_spec_field = [&](const char* key) {
      const auto ptr = nlohmann::json::json_pointer("/run/spec/" + std::string(key));
      return m.contains(ptr) && m.at(ptr).is_string() ? m.at(ptr).get<std::string>() : std::string();
    };
    const auto protocol_key = [&] { return manifest_digest(part("protocol")); };
    const auto environment_key = [&] { return manifest_digest(part("environment")); };
    const auto correctness = [&] {
      return correctness_key(workload().at("manifest").at("spec").at("correctness"));
    };
    const auto comparison = [&] {
      const auto& w = workload();
      ComparisonParts parts;
      parts.operation = lookup(operation_digest, string_field(w, "operationId"), "operation");
      parts.workload = lookup(workload_digest, string_field(w, "id"), "workload");
      parts.protocol = protocol_key();
      parts.environment = environment_key();
      parts.correctness = correctness();
      parts.metric = run_metric_key(normalize_manifest(part("run"), "run"));
      return comparison_key(parts);
    };
    v.compare("benchmark_runs", row, "runDigest", [&] { return manifest_digest(part("run")); }, string_field(row, "runDigest"));
    v.compare("benchmark_runs", row, "protocolKey", protocol_key, string_field(row, "protocolKey"));
    v.compare("benchmark_runs", row, "environmentKey", environment_key, string_field(row, "environmentKey"));
    v.compare("benchmark_runs", row, "correctnessKey", correctness, string_field(row, "correctnessKey"));
    v.compare("benchmark_runs", row, "comparisonKey", comparison, string_field(row, "comparisonKey"));
    remember(run_comparison_key, row, comparison);
    // Every value the row restates from its manifest: what was measured (primary metric, value, unit,
    // statistic, samples, interval) and the run's status, time, evidence and hardware.
    try {
      const json run = normalize_manifest(part("run"), "run");
      run_measurement_rows[string_field(row, "id")] = run_measurements(run);
      v.compare_facts("benchmark_runs", row, run_row_facts(run, part("environment")));
    } catch (const std::exception& e) {
      ++v.report.columns["benchmark_runs.facts"].mismatched;
      v.report.mismatches.push_back("benchmark_runs " + string_field(row, "id") + " facts: " + e.what());
    }
    // The run manifest's references agree with the rows it is filed under.
    v.compare("benchmark_runs", row, "run.spec.workloadDigest",
              [&] { return lookup(workload_digest, string_field(row, "workloadId"), "workload"); },
              run_spec_field("workloadDigest"));
    v.compare("benchmark_runs", row, "run.spec.implementationDigest",
              [&] { return lookup(implementation_digest, string_field(row, "implementationId"), "implementation"); },
              run_spec_field("implementationDigest"));
    v.compare("benchmark_runs", row, "run.spec.protocolDigest", protocol_key, run_spec_field("protocolDigest"));
    v.compare("benchmark_runs", row, "run.spec.environmentDigest", environment_key, run_spec_field("environmentDigest"));
  }
  v.compare_measurements("measurements", data.rows("measurements"), run_measurement_rows);
  for (const auto& row : data.rows("artifacts")) {
    const std::string digest = string_field(row, "contentDigest");
    v.compare("artifacts", row, "artifacts.contentDigest",
              [&] { return is_sha256_digest(digest) ? digest : std::string("<not a sha256 digest>"); }, digest);
    const auto it = source_size_by_digest.find(json(digest).dump());
    if (it != source_size_by_digest.end() && !it->second.is_null()) {
      v.compare("artifacts", row, "artifacts.sizeBytes", [&] { return it->second.dump(); },
                row.contains("sizeBytes") ? row["sizeBytes"].dump() : std::string());
    }
  }
  for (const auto& row : data.rows("record_events"))
    v.compare("record_events", row, "record_events.comparisonKey",
              [&] {
                const auto it = run_comparison_key.find(string_field(row, "runId"));
                if (it == run_comparison_key.end()) throw std::runtime_error("runId names no benchmark run");
                return it->second;
              },
              string_field(row, "comparisonKey"));
  verify_serving(v, data);
  return std::move(v.report);
}

VerifyReport verify_export(const std::string& path) { return verify_export(read_export(path)); }

}  // namespace kindex::evidence
