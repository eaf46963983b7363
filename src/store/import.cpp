#include "store/import.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/export.hpp"
#include "evidence/keys.hpp"
#include "evidence/manifest.hpp"
#include "evidence/reader.hpp"
#include "problem_manifest/problem_manifest.hpp"
#include "store/attestations.hpp"
#include "store/export.hpp"
#include "store/rows.hpp"
#include "store/schema.hpp"

namespace kindex::store {

using nlohmann::json;
namespace fs = std::filesystem;

int64_t ImportReport::total_inserted() const {
  int64_t n = 0;
  for (const auto& [t, c] : inserted) n += c;
  return n;
}

json ImportReport::to_json() const {
  return {{"inserted", inserted}, {"skipped", skipped}, {"recordEvents", record_events},
          {"totalInserted", total_inserted()}, {"warnings", warnings}};
}

namespace {

void merge(ImportReport& into, const ImportReport& from) {
  for (const auto& [t, n] : from.inserted) into.inserted[t] += n;
  for (const auto& [t, n] : from.skipped) into.skipped[t] += n;
  into.record_events += from.record_events;
  into.warnings.insert(into.warnings.end(), from.warnings.begin(), from.warnings.end());
}

void count(ImportReport& rep, const std::string& table, bool inserted) {
  (inserted ? rep.inserted : rep.skipped)[table] += 1;
  if (!inserted) rep.inserted[table] += 0;
}

void expect_digest(const std::string& where, const std::string& column, const json& stated, const std::string& actual) {
  std::string s = stated.is_string() ? stated.get<std::string>() : stated.dump();
  if (s != actual) throw Error(where, column, s, "stated digest does not match the recomputed " + actual);
}

// Streams an export, verifying each row against its manifests before inserting it. The whole file is one
// transaction: a refused row leaves the store exactly as it was.
class ExportImporter {
 public:
  ExportImporter(Store& store, std::string path, const ImportOptions& options)
      : store_(store), db_(store.db()), path_(std::move(path)), build_indexes_after_runs_(options.build_indexes_after_runs) {}

  ImportReport run() {
    Transaction tx(db_);
    // The runs already stored, by id: the parsing thread does not validate and digest the manifest of a row that
    // names a stored (id, runDigest) again (a re-import); this thread then checks that the row is the stored one.
    for (const auto& r : db_.query("SELECT id, run_digest FROM benchmark_runs")) known_runs_.emplace(r.text(0), r.text(1));
    // Parsing lines and validating and digesting run manifests (no store access) runs on a second thread, one batch
    // ahead of this one, which checks and inserts rows in file order. The rows this thread has handled are freed
    // on the parsing thread too.
    std::vector<RawLine> batch;
    std::future<std::vector<ParsedLine>> ahead;
    std::vector<ParsedLine> handled;
    auto handle_ahead = [&] {
      if (!ahead.valid()) return;
      handled = ahead.get();
      for (ParsedLine& pl : handled) handle(pl);
    };
    evidence::for_each_export_line(path_, [&](std::string_view text, std::size_t line) {
      batch.push_back({std::string(text), line});
      if (batch.size() < kBatchLines) return;
      auto next = std::async(std::launch::async, [this, lines = std::move(batch), old = std::move(handled)]() mutable {
        old.clear();
        return parse_batch(std::move(lines));
      });
      batch.clear();
      handled.clear();
      handle_ahead();
      ahead = std::move(next);
    });
    handle_ahead();
    for (ParsedLine& pl : parse_batch(std::move(batch))) handle(pl);
    if (indexes_dropped_) db_.script(kRunIndexes);
    for (const auto& ck : cohorts_) report_.record_events += store_.update_record(ck) ? 1 : 0;
    tx.commit();
    for (const auto& [table, rows] : unknown_tables_)
      report_.warnings.push_back(path_ + ": skipped " + std::to_string(rows) + " rows of table '" + table +
                                 "', which this version of kindex does not know");
    for (const auto& [column, rows] : unknown_columns_)
      report_.warnings.push_back(path_ + ": dropped column '" + column + "' of " + std::to_string(rows) +
                                 " rows, which this version of kindex does not know");
    return report_;
  }

 private:
  static constexpr std::size_t kBatchLines = 256;
  struct RawLine {
    std::string text;
    std::size_t line;
  };
  // What the parsing thread prepares for a line; anything it could not make is left empty and made again, in file
  // order, by the check that reports the error where it belongs.
  struct ParsedLine {
    RawLine raw;                              // text kept only when parsing failed (parsed again, in order, to throw)
    std::optional<evidence::ExportRow> row;
    std::optional<evidence::Manifest> run;  // a run row's manifest.run, validated and digested
    std::string protocol_digest, environment_digest;  // a run row's manifest.protocol and .environment
  };
  std::vector<ParsedLine> parse_batch(std::vector<RawLine> lines) {
    std::vector<ParsedLine> out(lines.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      ParsedLine& pl = out[i];
      pl.raw.line = lines[i].line;
      try {
        pl.row = evidence::parse_export_line(lines[i].text, path_ + ":" + std::to_string(lines[i].line));
      } catch (...) {
        pl.raw.text = std::move(lines[i].text);
        continue;
      }
      if (pl.row->table != "benchmark_runs") continue;
      try {
        const json& row = pl.row->row;
        const json& m = row.at("manifest");
        if (names_known_run(row)) continue;  // the handling thread compares it with the stored run
        pl.run = evidence::make_manifest(m.at("run"), path_);
        pl.protocol_digest = parser_digests_.digest(m.at("protocol"), path_);
        pl.environment_digest = parser_digests_.digest(m.at("environment"), path_);
      } catch (...) {
      }
    }
    return out;
  }
  bool names_known_run(const json& row) const {
    const auto id = row.find("id"), digest = row.find("runDigest");
    if (id == row.end() || digest == row.end() || !id->is_string() || !digest->is_string()) return false;
    const auto it = known_runs_.find(id->get_ref<const std::string&>());
    return it != known_runs_.end() && it->second == digest->get_ref<const std::string&>();
  }

  // Manifest digests, each distinct document validated once (protocols and environments repeat across runs).
  class DigestMemo {
   public:
    std::string digest(const json& manifest, const std::string& where) {
      // Most runs repeat one of a few protocols and environments: comparing with those is cheaper than serializing.
      for (const auto& [doc, digest] : recent_) {
        if (doc == manifest) return digest;
      }
      std::string key = manifest.dump();
      auto it = by_text_.find(key);
      if (it != by_text_.end()) return it->second;
      std::string d = evidence::make_manifest(manifest, where).digest;
      if (by_text_.size() < 10000) by_text_.emplace(std::move(key), d);
      if (recent_.size() < 8) recent_.emplace_back(manifest, d);
      return d;
    }

   private:
    std::unordered_map<std::string, std::string> by_text_;
    std::vector<std::pair<json, std::string>> recent_;  // the first documents seen, with their digests
  };

  // A row of kindex's attestations table (store/export.hpp): the signed document is read strictly and its signature
  // verified as it is kept (a forged one fails the whole import); its id must be the document's digest.
  void keep_exported_attestation(const json& row, const std::string& where) {
    const auto document = row.find("document");
    if (document == row.end() || !document->is_object())
      throw Error(where, "document", document == row.end() ? "" : document->dump().substr(0, 80), "the signed attestation (an object)");
    const evidence::Attestation a = evidence::parse_attestation(document->dump(), where);
    const json created = row.value("createdAt", json());
    const bool kept = keep_attestation(store_, a, where, created.is_string() ? created.get<std::string>() : "");  // verifies it
    const json id = row.value("id", json());
    if (id != a.digest())  // the import is undone
      throw Error(where, "id", id.is_string() ? id.get<std::string>() : id.dump(), "not the digest of its document (" + a.digest() + ")");
    count(report_, kAttestationsTable, kept);
  }

  void handle(ParsedLine& pl) {
    const std::size_t line = pl.raw.line;
    if (!pl.row) pl.row = evidence::parse_export_line(pl.raw.text, path_ + ":" + std::to_string(line));
    evidence::ExportRow& r = *pl.row;
    run_manifest_ = std::move(pl.run);
    parsed_ = &pl;
    if (r.table == kAttestationsTable) {
      keep_exported_attestation(r.row, path_ + ":" + std::to_string(line) + " " + r.table);
      return;
    }
    if (!evidence::is_export_table(r.table)) {
      ++unknown_tables_[r.table];
      return;
    }
    const auto id = r.row.find("id");
    std::string where = path_ + ":" + std::to_string(line) + " " + r.table + " " +
                        (id != r.row.end() && id->is_string() ? id->get<std::string>() : std::string());
    if (adopt_existing(r.table, r.row)) {
      count(report_, r.table, false);
      return;
    }
    if (is_stored_as_is(r.table, r.row)) {
      count(report_, r.table, false);
      return;
    }
    try {
      prepare(r.table, r.row, where);
      if (names_adopted_run(r.table, r.row)) {  // checked, but that run's rows are already stored
        count(report_, r.table, false);
        return;
      }
      drop_unknown_columns(r.table, r.row);
      const bool inserted = insert_row(db_, r.table, r.row, where);
      if (inserted && r.table == "benchmark_runs" && ++inserted_runs_ == build_indexes_after_runs_) {
        for (const char* index : kRunIndexNames) db_.script(std::string("DROP INDEX IF EXISTS ") + index);
        indexes_dropped_ = true;
      }
      if (!inserted) check_same_as_stored(r.table, r.row, where);
      count(report_, r.table, inserted);
    } catch (const Error&) {
      throw;
    } catch (const nlohmann::json::exception& e) {  // a row missing a member or of the wrong type
      throw Error(where, "row", "", std::string("not the shape of a KernelIndex ") + r.table + " row: " + e.what());
    }
  }

  // A manifest's digest, validated once per distinct document (protocols and environments repeat).
  std::string digest_of(const json& manifest, const std::string& where) { return digests_.digest(manifest, where); }

  std::string operation_digest(const std::string& id, const std::string& where) {
    if (auto it = ops_.find(id); it != ops_.end()) return it->second;
    auto rows = db_.query("SELECT semantic_digest FROM operations WHERE id = ?", {id});
    if (rows.empty()) throw Error(where, "operationId", id, "refers to an operation not in the export or the store");
    return ops_[id] = rows[0].text(0);
  }

  struct WorkloadInfo {
    std::string digest, operation_id, correctness_key;
  };
  const WorkloadInfo& workload(const std::string& id, const std::string& where) {
    if (auto it = workloads_.find(id); it != workloads_.end()) return it->second;
    auto rows = db_.query("SELECT workload_digest, operation_id, manifest FROM workloads WHERE id = ?", {id});
    if (rows.empty()) throw Error(where, "workloadId", id, "refers to a workload not in the export or the store");
    json m = json::parse(rows[0].text(2));
    return workloads_[id] = {rows[0].text(0), rows[0].text(1),
                             evidence::correctness_key(m.at("spec").value("correctness", json::object()))};
  }

  std::string implementation_digest(const std::string& id, const std::string& where) {
    if (auto it = impls_.find(id); it != impls_.end()) return it->second;
    auto rows = db_.query("SELECT implementation_digest FROM implementations WHERE id = ?", {id});
    if (rows.empty()) throw Error(where, "implementationId", id, "refers to an implementation not in the store");
    return impls_[id] = rows[0].text(0);
  }

  // The measurements a run's manifest states (from this file, or from a run already in the store); `runs` is
  // benchmark_runs or serving_runs.
  const std::vector<evidence::RunMeasurement>& run_measurements(const std::string& runs, const std::string& run_id,
                                                                const std::string& where) {
    if (auto it = measurements_.find(run_id); it != measurements_.end()) return it->second;
    const bool serving = runs == "serving_runs";
    auto rows = db_.query(serving ? "SELECT manifest FROM serving_runs WHERE id = ?"
                                  : "SELECT manifest FROM run_manifests WHERE run_id = ?",
                          {run_id});
    if (rows.empty()) throw Error(where, "runId", run_id, "refers to a row of " + runs + " not in the export or the store");
    const json manifest = json::parse(rows[0].text(0));
    return measurements_[run_id] = evidence::run_measurements(serving ? manifest : manifest.at("run"));
  }

  // Sources and projects are mutable and identified by slug (KernelIndex's publication: existing rows win): a
  // slug already stored under another id (e.g. the "flashinfer-bench" source a trace import created) is adopted,
  // and the export's rows that name the export's id are filed under the stored one.
  bool adopt_existing(const std::string& table, const json& row) {
    if (table != "sources" && table != "projects") return false;
    const json& slug = row.value("slug", json());
    const json& id = row.value("id", json());
    if (!slug.is_string() || !id.is_string()) return false;
    auto stored = db_.query("SELECT id FROM " + table + " WHERE slug = ?", {slug.get<std::string>()});
    if (stored.empty() || stored[0].text(0) == id.get<std::string>()) return false;
    (table == "sources" ? source_ids_ : project_ids_)[id.get<std::string>()] = stored[0].text(0);
    return true;
  }
  // A column a later export adds to a known table (a read-path projection such as benchmark_runs.solScore) is
  // dropped with a warning: the manifest the row carries stays the canonical fact.
  void drop_unknown_columns(const std::string& table, json& row) {
    const auto& keys = table_keys(table);
    for (auto it = row.begin(); it != row.end();) {
      const bool known = std::find(keys.begin(), keys.end(), it.key()) != keys.end() ||
                         (table == "benchmark_runs" && it.key() == "manifest");
      if (known) {
        ++it;
      } else {
        ++unknown_columns_[table + "." + it.key()];
        it = row.erase(it);
      }
    }
  }
  bool names_adopted_run(const std::string& table, const json& row) const {
    if (adopted_runs_.empty() || (table != "measurements" && table != "record_events")) return false;
    return adopted_runs_.count(row.value("runId", "")) > 0;
  }
  static void refile(json& row, const char* key, const std::map<std::string, std::string>& ids) {
    if (!row.contains(key) || !row[key].is_string()) return;
    if (auto it = ids.find(row[key].get<std::string>()); it != ids.end()) row[key] = it->second;
  }

  void prepare(const std::string& table, json& row, const std::string& where) {
    if (table == "implementations") refile(row, "projectId", project_ids_);
    if (table == "benchmark_runs") refile(row, "sourceId", source_ids_);
    if (table == "projects" && row.contains("manifest") && !row["manifest"].is_null()) {
      digest_of(row["manifest"], where + " manifest");
    } else if (table == "operations") {
      expect_digest(where, "semanticDigest", row.value("semanticDigest", json()), digest_of(row.at("manifest"), where));
      ops_[row.at("id")] = row["semanticDigest"];
    } else if (table == "workloads") {
      const json& m = row.at("manifest");
      std::string d = digest_of(m, where);
      expect_digest(where, "workloadDigest", row.value("workloadDigest", json()), d);
      std::string op = operation_digest(row.at("operationId"), where);
      if (m.at("spec").contains("operationSpecDigest")) {
        expect_digest(where, "manifest.spec.operationSpecDigest", m["spec"]["operationSpecDigest"], op);
      }
      row["kind"] = m.at("kind");
      workloads_[row.at("id")] = {d, row.at("operationId"),
                                  evidence::correctness_key(m["spec"].value("correctness", json::object()))};
    } else if (table == "implementations") {
      std::string d = digest_of(row.at("manifest"), where);
      expect_digest(where, "implementationDigest", row.value("implementationDigest", json()), d);
      impls_[row.at("id")] = d;
    } else if (table == "benchmark_runs") {
      prepare_run(row, where);
    } else if (table == "measurements" || table == "serving_measurements") {
      prepare_measurement(table, row, where);
    } else if (!evidence::serving_digest_column(table).empty()) {
      prepare_serving(table, row, where);
    } else if (table == "artifacts") {
      const json digest = row.value("contentDigest", json());
      if (!digest.is_string() || !evidence::is_sha256_digest(digest.get<std::string>()))
        throw Error(where, "contentDigest", digest.dump(), "expected sha256:<64 lowercase hex>");
    }
  }

  void prepare_run(json& row, const std::string& where) {
    const json& m = row.at("manifest");
    const evidence::Manifest run =
        run_manifest_ ? std::move(*run_manifest_) : evidence::make_manifest(m.at("run"), where + " manifest.run");
    run_manifest_.reset();
    expect_digest(where, "runDigest", row.value("runDigest", json()), run.digest);
    const std::string protocol = !parsed_->protocol_digest.empty() ? parsed_->protocol_digest
                                                                   : digest_of(m.at("protocol"), where + " manifest.protocol");
    const std::string environment = !parsed_->environment_digest.empty()
                                        ? parsed_->environment_digest
                                        : digest_of(m.at("environment"), where + " manifest.environment");
    expect_digest(where, "protocolKey", row.value("protocolKey", json()), protocol);
    expect_digest(where, "environmentKey", row.value("environmentKey", json()), environment);
    const json& spec = run.spec();
    expect_digest(where, "manifest.run.spec.protocolDigest", spec.value("protocolDigest", json()), protocol);
    expect_digest(where, "manifest.run.spec.environmentDigest", spec.value("environmentDigest", json()), environment);
    const WorkloadInfo& w = workload(row.at("workloadId"), where);
    expect_digest(where, "manifest.run.spec.workloadDigest", spec.value("workloadDigest", json()), w.digest);
    expect_digest(where, "manifest.run.spec.implementationDigest", spec.value("implementationDigest", json()),
                  implementation_digest(row.at("implementationId"), where));
    expect_digest(where, "correctnessKey", row.value("correctnessKey", json()), w.correctness_key);
    const std::string ck = comparison_key({operation_digest(w.operation_id, where), w.digest, protocol, environment,
                                           w.correctness_key, evidence::run_metric_key(run.document)});
    expect_digest(where, "comparisonKey", row.value("comparisonKey", json()), ck);
    // Every value the row restates (what was measured, when, on what) must be what its manifest says.
    // A column the row leaves out is filled from the manifest.
    for (const auto& [column, computed] : evidence::run_row_facts(run.document, m["environment"])) {
      if (!row.contains(column)) {
        row[column] = computed;
        continue;
      }
      const json stated = row[column];
      if (!evidence::same_fact(column, stated, computed))
        throw Error(where, column, stated.dump(), "disagrees with the run manifest it carries, which gives " + computed.dump());
    }
    measurements_[row.at("id")] = evidence::run_measurements(run.document);
    // Protocols and environments repeat across runs: each is written once per import.
    if (written_.insert(protocol).second) insert_row(db_, "protocols", {{"digest", protocol}, {"manifest", m["protocol"]}}, where);
    if (written_.insert(environment).second)
      insert_row(db_, "environments", {{"digest", environment}, {"manifest", m["environment"]}}, where);
    row["origin"] = "kernelindex-export";
    cohorts_.insert(ck);
  }

  // A row of a serving table: its manifest validated as the table's kind and digested, the digests it names
  // checked against the rows it is filed under, and every column it restates (evidence::serving_row_facts)
  // compared with the manifest (or filled from it when the row leaves it out).
  void prepare_serving(const std::string& table, json& row, const std::string& where) {
    static const std::map<std::string, std::string> kinds = {
        {"model_revisions", "ModelRevision"},          {"serving_stack_revisions", "ServingStackRevision"},
        {"serving_configurations", "ServingConfiguration"}, {"serving_workloads", "ServingWorkload"},
        {"serving_runs", "ServingRun"}};
    const json& document = row.at("manifest");
    const evidence::Manifest m = evidence::make_manifest(document, where + " manifest");
    if (m.kind() != kinds.at(table))
      throw Error(where, "manifest.kind", m.kind(), "a " + table + " row carries a " + kinds.at(table) + " manifest");
    const std::string column = evidence::serving_digest_column(table);
    expect_digest(where, column, row.value(column, json()), m.digest);
    if (table == "serving_stack_revisions") refile(row, "projectId", project_ids_);
    if (table == "serving_runs") refile(row, "sourceId", source_ids_);
    const json& spec = m.spec();
    const auto names = [&](const char* key, const char* named_table, const char* id_key) {
      expect_digest(where, std::string("manifest.spec.") + key, spec.value(key, json()),
                    serving_digest(named_table, row.value(id_key, json()), id_key, where));
    };
    if (table == "serving_configurations") names("stackDigest", "serving_stack_revisions", "stackRevisionId");
    if (table == "serving_runs") {
      names("modelDigest", "model_revisions", "modelRevisionId");
      names("configurationDigest", "serving_configurations", "configurationId");
      names("workloadDigest", "serving_workloads", "workloadId");
      measurements_[row.at("id")] = evidence::run_measurements(m.document);
    }
    for (const auto& [fact, computed] : evidence::serving_row_facts(table, m.document)) {
      if (!row.contains(fact)) {
        row[fact] = computed;
        continue;
      }
      if (!evidence::same_fact(fact, row[fact], computed))
        throw Error(where, fact, row[fact].dump(), "disagrees with the manifest it carries, which gives " + computed.dump());
    }
    serving_digests_[row.at("id")] = m.digest;
  }

  // The manifest digest of the serving row `id` of `table` (from this file, or from the store).
  std::string serving_digest(const std::string& table, const json& id, const char* id_key, const std::string& where) {
    if (!id.is_string()) throw Error(where, id_key, id.dump(), "expected the id of a " + table + " row");
    if (auto it = serving_digests_.find(id.get<std::string>()); it != serving_digests_.end()) return it->second;
    const std::string column = snake_case(evidence::serving_digest_column(table));
    auto rows = db_.query("SELECT " + column + " FROM " + table + " WHERE id = ?", {id.get<std::string>()});
    if (rows.empty()) throw Error(where, id_key, id.get<std::string>(), "refers to a " + table + " row not in the export or the store");
    return serving_digests_[id.get<std::string>()] = rows[0].text(0);
  }

  void prepare_measurement(const std::string& table, const json& row, const std::string& where) {
    const std::string metric = row.value("metric", ""), statistic = row.value("statistic", "");
    for (const auto& m : run_measurements(table == "measurements" ? "benchmark_runs" : "serving_runs", row.value("runId", ""), where)) {
      if (m.metric != metric || m.statistic != statistic) continue;
      const json stated_value = row.value("value", json()), stated_unit = row.value("unit", json());
      if (!evidence::same_fact("value", stated_value, m.value))
        throw Error(where, "value", stated_value.dump(), "disagrees with the run manifest, which gives " + json(m.value).dump());
      if (!evidence::same_fact("unit", stated_unit, m.unit))
        throw Error(where, "unit", stated_unit.dump(), "disagrees with the run manifest, which gives " + m.unit);
      const json count = m.sample_count ? json(*m.sample_count) : json();
      if (!evidence::same_fact("sampleCount", row.value("sampleCount", json()), count))
        throw Error(where, "sampleCount", row.value("sampleCount", json()).dump(),
                    "disagrees with the run manifest, which gives " + count.dump());
      return;
    }
    throw Error(where, "metric", metric + ":" + statistic, "the run's manifest states no such measurement");
  }

  // A row whose key is already stored inserted nothing: that is only "already present" when the stored row is
  // the same thing. An id (or unique name) stored with other content is refused, naming both.
  void check_same_as_stored(const std::string& table, const json& row, const std::string& where) {
    static const std::map<std::string, std::vector<std::string>> identity = {
        {"sources", {"slug"}},
        {"projects", {"slug"}},
        {"operations", {"semanticDigest", "slug"}},
        {"workloads", {"workloadDigest", "operationId"}},
        {"implementations", {"implementationDigest", "operationId"}},
        {"benchmark_runs", {"runDigest"}},
        {"measurements", {"runId", "metric", "statistic", "unit", "value"}},
        {"record_events", {"comparisonKey", "runId", "previousRunId", "cause"}},
        {"artifacts", {"contentDigest"}},
        {"model_revisions", {"modelDigest"}},
        {"serving_stack_revisions", {"stackDigest"}},
        {"serving_configurations", {"configurationDigest"}},
        {"serving_workloads", {"workloadDigest"}},
        {"serving_runs", {"runDigest"}},
        {"serving_measurements", {"runId", "metric", "statistic", "unit", "value"}}};
    const auto it = identity.find(table);
    if (it == identity.end() || !row.contains("id")) return;
    std::string cols;
    for (const auto& k : it->second) cols += (cols.empty() ? "" : ", ") + snake_case(k);
    const std::string id = row["id"].is_string() ? row["id"].get<std::string>() : row["id"].dump();
    auto stored = db_.query("SELECT " + cols + " FROM " + table + " WHERE id = ?", {id});
    if (stored.empty() && table == "benchmark_runs") {
      // The same run (same runDigest) stored under another id, e.g. by kindex's import of the trace KernelIndex
      // published it from: it is already present, and the export's rows about it are not added twice.
      auto same = db_.query("SELECT id FROM benchmark_runs WHERE run_digest = ?", {row.value("runDigest", "")});
      if (!same.empty()) {
        adopted_runs_.insert(id);
        return;
      }
    }
    if (stored.empty()) {
      // Not this id: another row holds one of its unique columns. Name the column that clashes (an operation
      // whose manifest changed keeps its slug, so the slug is what another id holds, not the new digest).
      for (const auto& key : it->second) {
        const json value = row.value(key, json());
        auto other = db_.query("SELECT id FROM " + table + " WHERE " + snake_case(key) + " = ?",
                               {value.is_string() ? value.get<std::string>() : value.dump()});
        if (!other.empty())
          throw Error(where, key, value.is_string() ? value.get<std::string>() : value.dump(),
                      "already stored under another id (" + other[0].text(0) +
                          "): refused rather than counted as present");
      }
      throw Error(where, "id", id, "not stored, yet a unique column of it is: refused rather than counted as present");
    }
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      const std::string& key = it->second[i];
      const json stated = row.value(key, json());
      json held;
      if (stored[0].is_null(i)) {
        held = nullptr;
      } else if (stated.is_number()) {
        held = stored[0].real(i);
      } else {
        held = stored[0].text(i);
      }
      if (!evidence::same_fact(key, stated, held))
        throw Error(where, key, stated.is_string() ? stated.get<std::string>() : stated.dump(),
                    "id " + id + " is already stored with " + key + " " +
                        (held.is_string() ? held.get<std::string>() : held.dump()) +
                        ": a row with a stored id but different content is refused");
    }
  }

  // Runs share a few cohorts: each distinct set of parts is hashed once.
  std::string comparison_key(const evidence::ComparisonParts& parts) {
    std::string key = parts.operation + ' ' + parts.workload + ' ' + parts.protocol + ' ' + parts.environment + ' ' +
                      parts.correctness + ' ' + parts.metric;
    auto it = comparison_keys_.find(key);
    if (it == comparison_keys_.end()) it = comparison_keys_.emplace(std::move(key), evidence::comparison_key(parts)).first;
    return it->second;
  }

  // A row whose id is stored with exactly the stated content (every column it states, and for a run the same
  // manifest text) is already present: checking it again could only give the answer its first import gave, so its
  // manifests are not validated and digested again (a re-import). Any difference takes the full check, which
  // refuses a changed row naming both digests.
  bool is_stored_as_is(const std::string& table, json& row) {
    if (table != "benchmark_runs" && table != "measurements") return false;
    const auto id = row.find("id");
    if (id == row.end() || !id->is_string()) return false;
    if (table == "benchmark_runs" && (!row.contains("manifest") || !names_known_run(row))) return false;
    if (table == "benchmark_runs") refile(row, "sourceId", source_ids_);
    const auto& keys = table_keys(table);
    const std::string& sql = table == "benchmark_runs" ? kStoredRunSql : kStoredMeasurementSql;
    const auto stored = db_.query(sql, {id->get<std::string>()});
    if (stored.empty()) return false;
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (it.key() == "manifest" || it.key() == "origin") continue;
      const auto column = std::find(keys.begin(), keys.end(), it.key());
      if (column == keys.end()) return false;  // an unknown column: the full path drops it with a warning
      if (!same_as_stored(*it, stored[0].cells[column - keys.begin()])) return false;
    }
    // A column the full check requires must be stated: a measurement states all of its own (an absent sampleCount
    // is checked as null against the manifest), a run its digests and keys (its measured facts, when absent, are
    // filled from the manifest).
    static const std::vector<std::string> run_required = {"runDigest",      "workloadId",     "implementationId",
                                                          "protocolKey",    "environmentKey", "correctnessKey",
                                                          "comparisonKey"};
    for (const auto& key : table == "benchmark_runs" ? run_required : keys) {
      if (row.contains(key)) continue;
      if (table == "benchmark_runs") return false;
      if (!same_as_stored(json(), stored[0].cells[std::find(keys.begin(), keys.end(), key) - keys.begin()])) return false;
    }
    if (table == "benchmark_runs") {
      if (stored[0].text(keys.size()) != row["manifest"].dump()) return false;  // as run_manifests stores it
      cohorts_.insert(stored[0].text(std::find(keys.begin(), keys.end(), "comparisonKey") - keys.begin()));
    }
    return true;
  }
  // Whether a stated value is what insert_row would have stored for it.
  static bool same_as_stored(const json& stated, const Value& held) {
    if (stated.is_null()) return std::holds_alternative<std::monostate>(held);
    if (stated.is_boolean()) {
      const auto n = std::get_if<int64_t>(&held);
      return n && *n == (stated.get<bool>() ? 1 : 0);
    }
    if (stated.is_number()) {
      if (const auto d = std::get_if<double>(&held)) return stated.get<double>() == *d;
      const auto n = std::get_if<int64_t>(&held);
      return n && stated.is_number_integer() && stated.get<int64_t>() == *n;
    }
    const auto text = std::get_if<std::string>(&held);
    if (!text) return false;
    if (stated.is_string()) return *text == stated.get_ref<const std::string&>();
    return *text == stated.dump();
  }
  static inline const std::string kStoredRunSql = [] {
    std::string cols;
    for (const auto& k : table_keys("benchmark_runs")) cols += "r." + snake_case(k) + ", ";
    return "SELECT " + cols + "m.manifest FROM benchmark_runs r JOIN run_manifests m ON m.run_id = r.id WHERE r.id = ?";
  }();
  static inline const std::string kStoredMeasurementSql = [] {
    std::string cols;
    for (const auto& k : table_keys("measurements")) cols += (cols.empty() ? "" : ", ") + snake_case(k);
    return "SELECT " + cols + " FROM measurements WHERE id = ?";
  }();

  Store& store_;
  Db& db_;
  std::string path_;
  const int64_t build_indexes_after_runs_;
  int64_t inserted_runs_ = 0;
  bool indexes_dropped_ = false;  // built again before the import's record keeping reads them
  ImportReport report_;
  DigestMemo digests_;         // this thread's
  DigestMemo parser_digests_;  // the parsing thread's
  std::unordered_map<std::string, std::string> known_runs_;  // stored runs: id -> runDigest (read before parsing)
  std::unordered_map<std::string, std::string> comparison_keys_;
  const ParsedLine* parsed_ = nullptr;  // the line being handled
  std::map<std::string, std::string> ops_, impls_;
  std::map<std::string, WorkloadInfo> workloads_;
  std::map<std::string, std::vector<evidence::RunMeasurement>> measurements_;  // by run id (benchmark or serving)
  std::map<std::string, std::string> serving_digests_;  // serving row id -> its manifest's digest
  std::map<std::string, std::size_t> unknown_tables_, unknown_columns_;
  std::map<std::string, std::string> source_ids_, project_ids_;  // export id -> stored id (adopt_existing)
  std::set<std::string> adopted_runs_;  // export run ids whose run is stored under another id
  std::set<std::string> cohorts_;
  std::set<std::string> written_;  // protocol and environment digests inserted by this import
  std::optional<evidence::Manifest> run_manifest_;  // the current run row's manifest.run, made on the parsing thread
};

std::vector<std::string> expand(const std::vector<std::string>& paths, const std::set<std::string>& extensions,
                                bool recursive) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      auto add = [&](const fs::directory_entry& e) {
        if (e.is_regular_file() && extensions.count(e.path().extension().string())) found.push_back(e.path().string());
      };
      if (recursive) {
        for (const auto& e : fs::recursive_directory_iterator(p)) add(e);
      } else {
        for (const auto& e : fs::directory_iterator(p)) add(e);
      }
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      out.push_back(p);
    } else {
      throw Error(p, "path", p, "no such file or directory");
    }
  }
  return out;
}

json read_json_file(const std::string& path) {
  return evidence::parse_json_strict(evidence::read_file_bytes(path), path);
}

// Loads FIB/SOL definitions (or solutions) keyed by "name", keeping the file's key order (a definition's inputs
// and outputs are objects whose order is the operation's argument order).
std::map<std::string, nlohmann::ordered_json> load_named(const std::vector<std::string>& paths) {
  std::map<std::string, nlohmann::ordered_json> out;
  for (const auto& f : expand(paths, {".json"}, true)) {
    read_json_file(f);  // strict: refuses duplicate keys and malformed JSON with the file named
    auto j = nlohmann::ordered_json::parse(evidence::read_file_bytes(f));
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) throw Error(f, "name", "", "missing name");
    std::string name = j["name"].get<std::string>();
    out[name] = std::move(j);
  }
  return out;
}

// A harness's trace protocol exactly as KernelIndex publishes it for imported traces: FlashInfer-Bench's is seed
// 000's (pinned digest sha256:7d44d206...), so imported FIB traces join the same cohorts as the export's.
json trace_protocol(const std::string& harness, const std::string& display_name, const std::string& repository) {
  std::string snake = harness;
  std::replace(snake.begin(), snake.end(), '-', '_');
  return {{"apiVersion", evidence::kApiVersion},
          {"kind", "BenchmarkProtocol"},
          {"metadata", {{"name", harness + "-trace"}, {"title", display_name + " trace harness"}}},
          {"spec",
           {{"harness", {{"name", harness}, {"repository", repository}}},
            {"correctness", {{"reference", "definition reference implementation"}, {"comparator", snake + "_eval"}}},
            {"measurement", {{"timer", "harness_reported"}, {"primaryStatistic", "mean"}}},
            {"comparability", {{"family", snake + "_trace"}}}}}};
}

}  // namespace

ImportReport import_export(Store& store, const std::string& path, const ImportOptions& options) {
  return ExportImporter(store, path, options).run();
}

namespace {

// The export-shaped row of a serving table for a manifest kindex was given (no export row): id from its digest,
// the restated columns from the manifest (evidence::serving_row_facts, the facts an export row is checked against).
json serving_row(const std::string& table, const json& document, const std::string& digest) {
  json row = {{"id", id_from_digest(digest)}, {evidence::serving_digest_column(table), digest}, {"manifest", document},
              {"createdAt", evidence::utc_timestamp_now()}};
  for (const auto& [column, value] : evidence::serving_row_facts(table, document)) row[column] = value;
  const json& meta = member_or_empty(document, "metadata");
  const json& spec = member_or_empty(document, "spec");
  if (table == "serving_stack_revisions")
    row["name"] = meta.value("title", member_or_empty(spec, "project").value("name", meta.value("name", "")));
  if (table == "serving_configurations") row["summary"] = meta.value("title", meta.value("name", ""));
  return row;
}

// A ServingRun whose model, configuration (with its stack) and workload manifests are all in the store becomes a
// serving run with its measurements, each row inserted as an export's would be. False when one is missing.
bool record_serving_run(Store& store, const evidence::Manifest& run, const std::string& where, ImportReport& rep) {
  const json& spec = run.spec();
  const std::string model = spec.value("modelDigest", ""), configuration = spec.value("configurationDigest", ""),
                    workload = spec.value("workloadDigest", "");
  const auto model_doc = store.manifest(model), configuration_doc = store.manifest(configuration),
             workload_doc = store.manifest(workload);
  if (!model_doc || !configuration_doc || !workload_doc) return false;
  const std::string stack = configuration_doc->at("spec").value("stackDigest", "");
  const auto stack_doc = store.manifest(stack);
  if (!stack_doc) return false;
  Db& db = store.db();
  const auto put = [&](const std::string& table, const json& row) { count(rep, table, insert_row(db, table, row, where)); };
  // Inserts a manifest's row, or finds the row an export filed it under: the id of the row with its digest.
  const auto file = [&](const std::string& table, const json& row) {
    put(table, row);
    const std::string column = evidence::serving_digest_column(table);
    return db.query("SELECT id FROM " + table + " WHERE " + snake_case(column) + " = ?", {row[column].get<std::string>()})
        .at(0)
        .text(0);
  };
  json c = serving_row("serving_configurations", *configuration_doc, configuration);
  c["stackRevisionId"] = file("serving_stack_revisions", serving_row("serving_stack_revisions", *stack_doc, stack));
  json r = serving_row("serving_runs", run.document, run.digest);
  r["modelRevisionId"] = file("model_revisions", serving_row("model_revisions", *model_doc, model));
  r["configurationId"] = file("serving_configurations", c);
  r["workloadId"] = file("serving_workloads", serving_row("serving_workloads", *workload_doc, workload));
  r["id"] = file("serving_runs", r);
  if (r["id"] != id_from_digest(run.digest)) return true;  // an export's run: its measurement rows came with it
  for (const auto& m : evidence::run_measurements(run.document)) {
    const json key = {{"runDigest", run.digest}, {"metric", m.metric}, {"statistic", m.statistic}};
    put("serving_measurements", {{"id", id_from_digest(evidence::sha256_digest(key))}, {"runId", r["id"]},
                                 {"metric", m.metric}, {"statistic", m.statistic}, {"unit", m.unit}, {"value", m.value},
                                 {"sampleCount", m.sample_count ? json(*m.sample_count) : json()}});
  }
  return true;
}

}  // namespace

ImportReport import_manifests(Store& store, const std::vector<std::string>& paths) {
  ImportReport rep;
  std::vector<evidence::Manifest> runs;
  std::vector<std::pair<evidence::Manifest, std::string>> serving_runs;
  for (const auto& f : expand(paths, {".yaml", ".yml", ".json"}, false)) {
    json doc = evidence::read_manifest_file(f);
    PutResult r = store.put_manifest(doc, f);
    count(rep, "manifests", r.inserted);
    if (doc.value("kind", "") == "BenchmarkRun") runs.push_back(evidence::make_manifest(doc, f));
    if (doc.value("kind", "") == "ServingRun") serving_runs.emplace_back(evidence::make_manifest(doc, f), f);
  }
  // A ServingRun becomes a serving run once everything it names is in the store.
  for (const auto& [run, where] : serving_runs) {
    if (!record_serving_run(store, run, where, rep)) rep.skipped["serving_runs_missing_references"] += 1;
  }
  // A BenchmarkRun becomes a ranked run once everything it names is in the store.
  for (const auto& run : runs) {
    const json& s = run.spec();
    auto impl = store.manifest(s.value("implementationDigest", ""));
    auto wl = store.manifest(s.value("workloadDigest", ""));
    auto proto = store.manifest(s.value("protocolDigest", ""));
    auto env = store.manifest(s.value("environmentDigest", ""));
    std::optional<json> op;
    if (wl) op = store.manifest(wl->at("spec").value("operationSpecDigest", ""));
    if (!impl || !wl || !proto || !env || !op) {
      rep.skipped["runs_missing_references"] += 1;
      continue;
    }
    OwnRun r;
    r.operation = *op;
    r.workload = *wl;
    r.implementation = *impl;
    r.protocol = *proto;
    r.environment = *env;
    r.run = run.document;
    r.origin = "manifest";
    r.definition_name = op->at("metadata").value("name", "");
    r.project = json{{"apiVersion", evidence::kApiVersion},
                     {"kind", "SoftwareProject"},
                     {"metadata", {{"name", "manifest-" + impl->at("metadata").value("name", "unnamed")}}},
                     {"spec", {{"name", impl->at("metadata").value("title", impl->at("metadata").value("name", ""))}}}};
    RecordResult res = store.record_run(r);
    count(rep, "benchmark_runs", res.inserted);
    rep.record_events += res.new_record ? 1 : 0;
  }
  return rep;
}

namespace {

// A trace file's named definitions and solutions (--definitions, --solutions).
struct TraceContext {
  std::map<std::string, nlohmann::ordered_json> definitions, solutions;
  const ImportOptions& options;
};

// The trace's OperationSpec: from its definition's JSON when given (`def` is then that JSON), else from the store.
json trace_operation(Store& store, const TraceContext& c, const std::string& def_name, const std::string& where,
                     nlohmann::ordered_json& def) {
  if (auto it = c.definitions.find(def_name); it != c.definitions.end()) {
    def = it->second;
    return problem_manifest::operation_document(def, where);
  }
  auto rows = store.db().query(
      "SELECT o.manifest FROM operations o JOIN operation_aliases a ON a.operation_id = o.id WHERE a.alias = ? "
      "LIMIT 1",
      {def_name});
  if (rows.empty()) throw Error(where, "definition", def_name, "unknown definition: pass its JSON with --definitions");
  return json::parse(rows[0].text(0));
}

// The ImplementationRevision of a trace's solution (`sol`: its document when given, else {}).
json trace_implementation(const json& op, const std::string& op_digest, const std::string& sol_name, const json& sol) {
  json sol_spec = sol.value("spec", json::object());
  std::string language = problem_manifest::slug(sol_spec.value("language", "unknown"));
  std::replace(language.begin(), language.end(), '-', '_');
  if (language.empty() || !std::isalpha(static_cast<unsigned char>(language[0]))) language = "unknown";
  json callable = {{"language", language}};
  json dtypes = json::array();
  for (const char* part : {"inputs", "outputs"}) {
    for (const auto& t : op.at("spec").at(part)) {
      json d = t.contains("tensor") ? t["tensor"]["dtype"] : t["scalar"]["dtype"];
      if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
    }
  }
  json impl_spec = {{"callable", callable},
                    {"support", {{"hardwareArchitectures", json::array({"unknown"})}, {"dtypes", dtypes}}},
                    {"licensing", json::object()},
                    {"projectRevision", json::object()},
                    {"operation", {{"specDigest", op_digest}}}};
  if (sol_spec.contains("target_hardware")) {
    impl_spec["support"]["productsTested"] = json::array();
    for (const auto& h : sol_spec["target_hardware"]) impl_spec["support"]["productsTested"].push_back(h);
  }
  if (auto entry = sol_spec.value("entry_point", std::string()); !entry.empty()) {
    auto sep = entry.find("::");
    impl_spec["callable"]["path"] = entry.substr(0, sep);
    if (sep != std::string::npos) impl_spec["callable"]["symbol"] = entry.substr(sep + 2);
  } else {
    // No solution document: the harness calls the solution by its name, so the name is the callable. Without
    // it every solution of a definition digests alike, and one file's FlashInfer baseline and kindex's traces
    // would file under one implementation (the first imported).
    impl_spec["callable"]["symbol"] = evidence::clip_text(sol_name, 200);
  }
  if (sol.contains("sources") && sol["sources"].is_array() && !sol["sources"].empty()) {
    const json& src = sol["sources"][0];
    std::string content = src.value("content", "");
    impl_spec["source"] = {{"contentDigest", "sha256:" + evidence::sha256_hex(content)},
                           {"fileName", src.value("path", "source")}};
    if (!content.empty()) impl_spec["source"]["sizeBytes"] = content.size();
  }
  json impl_meta = {{"name", problem_manifest::slug(sol_name)},
                    {"title", evidence::clip_text(sol_name, evidence::kMaxTitleChars)}};
  impl_meta["authors"] = json::array({{{"name", sol.value("author", std::string("unknown"))}}});
  return {{"apiVersion", evidence::kApiVersion},
          {"kind", "ImplementationRevision"},
          {"metadata", impl_meta},
          {"spec", impl_spec}};
}

// The ExecutionEnvironment as the trace's evaluation reports it.
json trace_environment(const json& ev) {
  json env_in = ev.value("environment", json::object());
  json libs = env_in.value("libs", json::object());
  json software = json::object(), libraries = json::object();
  for (const auto& [k, v] : libs.items()) {
    if (!v.is_string()) continue;
    if (k == "torch") {
      software["framework"] = {{"name", "pytorch"}, {"version", v}};
    } else if (k == "cuda") {
      software["cudaToolkit"] = v;
    } else {
      libraries[k] = v;
    }
  }
  if (!libraries.empty()) software["libraries"] = libraries;
  std::string product = env_in.value("hardware", std::string("unknown"));
  json env_spec = {{"hardware", {{"vendor", "nvidia"}, {"product", product}, {"architecture", "unknown"}}}};
  if (!software.empty()) env_spec["software"] = software;
  return {{"apiVersion", evidence::kApiVersion},
          {"kind", "ExecutionEnvironment"},
          {"metadata",
           {{"name", problem_manifest::slug("trace-" + product + "-" + software.dump()).substr(0, 100)},
            {"title", product + " (trace-reported software)"}}},
          {"spec", env_spec}};
}

// The BenchmarkRun's spec of a trace's evaluation: status, time, timing and correctness, and what the source
// reported. Both harnesses write `datetime.now().isoformat()`: a time without a zone, read as UTC (as
// KernelIndex's importers do); the harness's own text and the rule applied are kept as run labels (`labels`).
json trace_run_spec(const json& ev, const std::string& where, json& labels) {
  std::string observed_at;
  if (auto ts = ev.find("timestamp"); ts != ev.end()) {
    if (!ts->is_string()) throw Error(where, "evaluation.timestamp", ts->dump(), "expected an ISO-8601 string");
    const std::string text = ts->get<std::string>();
    observed_at = evidence::utc_instant(text, where, "evaluation.timestamp");
    labels["source_timestamp"] = text;
    const char last = text.empty() ? ' ' : text.back();
    if (last != 'Z' && last != 'z' && text.find_first_of("+-", 19) == std::string::npos)
      labels["source_timestamp_rule"] = "no zone: read as UTC";
  } else {
    observed_at = evidence::utc_timestamp_now();
  }
  std::string status = ev.value("status", std::string("PASSED"));
  std::transform(status.begin(), status.end(), status.begin(), [](unsigned char c) { return std::tolower(c); });
  if (status == "reward_hack") status = "suspected_reward_hack";  // SOL ExecBench's name for KernelIndex's status
  json run_spec = {{"status", status}, {"observedAt", observed_at}};
  json perf = ev.value("performance", json());
  json metrics = json::object();
  if (perf.is_object() && perf.contains("latency_ms") && perf["latency_ms"].is_number()) {
    double ms = perf["latency_ms"].get<double>();
    run_spec["timing"] = {{"latencyNs", {{"mean", std::llround(ms * 1e6)}}}, {"primaryStatistic", "mean"}};
    for (const auto& [k, v] : perf.items()) {
      if (v.is_number()) metrics[k] = v;
    }
  }
  if (json c = ev.value("correctness", json()); c.is_object()) {
    json corr = {{"comparator", "sol_execbench_eval"}};
    if (c.contains("max_absolute_error") && c["max_absolute_error"].is_number()) {
      corr["maximumAbsoluteError"] = c["max_absolute_error"];
    }
    if (c.contains("max_relative_error") && c["max_relative_error"].is_number()) {
      corr["maximumRelativeError"] = c["max_relative_error"];
    }
    run_spec["correctness"] = corr;
  }
  if (!metrics.empty()) run_spec["sourceNative"]["metrics"] = metrics;
  return run_spec;
}

// One trace line into the store (a line without an evaluation is counted as skipped).
void import_trace_line(Store& store, const TraceContext& c, const std::string& line, const std::string& where,
                       ImportReport& rep) {
  json t = evidence::parse_json_strict(line, where);
  if (!t.is_object() || !t.contains("definition")) throw Error(where, "definition", "", "not a trace line");
  if (!t.contains("evaluation") || t["evaluation"].is_null()) {
    rep.skipped["trace_lines_without_evaluation"] += 1;
    return;
  }
  const std::string def_name = t.at("definition").get<std::string>();
  nlohmann::ordered_json def;
  const json op = trace_operation(store, c, def_name, where, def);
  std::string source = c.options.source;
  if (source.empty()) source = def.contains("op_type") || def.empty() ? "flashinfer-bench" : "sol-execbench";

  const evidence::Manifest workload_manifest = problem_manifest::workload_case(op, t.at("workload"), def_name, where);
  const json& workload = workload_manifest.document;
  const std::string op_digest = workload.at("spec").at("operationSpecDigest");

  // Implementation (from the solution when given) and its project (the solution's author).
  const std::string sol_name =
      t.value("solution", json("unknown")).is_string() ? t["solution"].get<std::string>() : "unknown";
  const json sol = c.solutions.count(sol_name) ? json::parse(c.solutions.at(sol_name).dump()) : json::object();
  const json implementation = trace_implementation(op, op_digest, sol_name, sol);
  const std::string author = sol.value("author", std::string("unknown"));
  const json project = {{"apiVersion", evidence::kApiVersion},
                        {"kind", "SoftwareProject"},
                        {"metadata", {{"name", problem_manifest::slug(source + "-" + author)}}},
                        {"spec", {{"name", author}}}};
  const json& ev = t.at("evaluation");
  const json environment = trace_environment(ev);
  const json protocol =
      source == "sol-execbench"
          ? trace_protocol("sol-execbench", "SOL-ExecBench", "https://github.com/NVIDIA/SOL-ExecBench")
          : trace_protocol("flashinfer-bench", "FlashInfer-Bench", "https://github.com/flashinfer-ai/flashinfer-bench");
  json labels = json::object();
  json run_spec = trace_run_spec(ev, where, labels);
  run_spec["protocolDigest"] = evidence::make_manifest(protocol, where).digest;
  run_spec["workloadDigest"] = workload_manifest.digest;
  run_spec["environmentDigest"] = evidence::make_manifest(environment, where).digest;
  run_spec["implementationDigest"] = evidence::make_manifest(implementation, where).digest;
  run_spec["sourceNative"]["source"] = source;
  run_spec["sourceNative"]["benchmark"] = def_name;
  const json run = {
      {"apiVersion", evidence::kApiVersion},
      {"kind", "BenchmarkRun"},
      {"metadata",
       {{"name", problem_manifest::slug("trace-" + def_name) + "-" + evidence::sha256_hex(line).substr(0, 8)},
        {"title", evidence::clip_text(sol_name + " · " + def_name, evidence::kMaxTitleChars)},
        {"labels", labels}}},
      {"spec", run_spec}};
  RecordResult res = store.record_run(OwnRun{.operation = op, .workload = workload, .implementation = implementation,
                                             .project = project, .protocol = protocol, .environment = environment,
                                             .run = run, .definition_name = def_name, .origin = source});
  count(rep, "benchmark_runs", res.inserted);
  rep.record_events += res.new_record ? 1 : 0;
}

}  // namespace

ImportReport import_traces(Store& store, const std::string& path, const ImportOptions& options) {
  ImportReport rep;
  const TraceContext context{load_named(options.definitions), load_named(options.solutions), options};
  std::ifstream in(path);
  if (!in) throw Error(path, "path", path, "cannot open trace file");
  std::string line;
  size_t line_number = 0;
  // Every line is diagnosed: a bad line is reported with its number and the others are still read, then the
  // whole file is refused (the caller's transaction takes back what the good lines wrote).
  std::vector<std::string> errors;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_number);
    try {
      import_trace_line(store, context, line, where, rep);
    } catch (const std::exception& e) {
      const std::string message = e.what();
      const bool named = message.rfind(where + ":", 0) == 0 || message.rfind(where + " ", 0) == 0;
      errors.push_back(named ? message : where + ": " + message);
    }
  }
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += "\n  " + e;
    throw Error(path, "lines", std::to_string(errors.size()) + " of " + std::to_string(line_number),
                "trace lines refused, nothing imported:" + all);
  }
  return rep;
}

ImportReport import_own_records(Store& store, const std::string& path) {
  ImportReport rep;
  evidence::for_each_line(path, "kindex run records", [&](const std::string& line, const std::string& where) {
    RecordResult res = store.record_run(own_run_from_json(evidence::parse_json_strict(line, where), where));
    count(rep, "benchmark_runs", res.inserted);
    rep.record_events += res.new_record ? 1 : 0;
  });
  return rep;
}

ImportReport import_attestations(Store& store, const std::string& path) {
  ImportReport rep;
  evidence::for_each_line(path, "attestations", [&](const std::string& line, const std::string& where) {
    count(rep, "run_attestations", keep_attestation(store, evidence::parse_attestation(line, where), where));
  });
  return rep;
}

namespace {

enum class Format { export_rows, manifest, traces, own_records, attestations };

// The format of a file from its content, never its name: a zstd frame is an export; otherwise the first JSON-object
// lines say which line format it is ({"table","row"}, {"kindexRun"}, {"kindexAttestation"}, {"definition", ...} trace lines, a one-line
// manifest); a file that is one JSON document or YAML is a manifest. A damaged first line does not hide the
// format of the lines after it (their reader then reports the bad line with its number).
Format detect_format(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Format::manifest;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "path", path, "cannot open");
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && static_cast<unsigned char>(magic[0]) == 0x28 && static_cast<unsigned char>(magic[1]) == 0xb5 &&
      static_cast<unsigned char>(magic[2]) == 0x2f && static_cast<unsigned char>(magic[3]) == 0xfd)
    return Format::export_rows;
  in.clear();
  in.seekg(0);
  std::string line;
  for (int seen = 0; seen < 5 && std::getline(in, line);) {
    const auto start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos) continue;
    if (line[start] != '{') return Format::manifest;  // YAML
    ++seen;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;  // a damaged line, or the first line of a multi-line JSON document
    if (j.contains("table") && j.contains("row")) return Format::export_rows;
    if (j.contains("kindexRun")) return Format::own_records;
    if (j.contains("kindexAttestation")) return Format::attestations;
    if (j.contains("definition") && (j.contains("workload") || j.contains("evaluation"))) return Format::traces;
    if (j.contains("apiVersion")) return Format::manifest;
    throw Error(path, "format", line.substr(start, 60),
                "not a KernelIndex export, manifest, FlashInfer-Bench/SOL-ExecBench trace, kindex run record or "
                "attestation");
  }
  return Format::manifest;  // one JSON document over several lines (its reader reports any damage)
}

}  // namespace

ImportReport import_files(Store& store, const std::vector<std::string>& paths, const ImportOptions& options) {
  // One import, one transaction: any refused row or file leaves the store exactly as it was.
  Transaction tx(store.db());
  ImportReport total;
  std::vector<std::string> manifests;
  for (const auto& p : paths) {
    try {
      switch (detect_format(p)) {
        case Format::export_rows: merge(total, import_export(store, p, options)); break;
        case Format::own_records: merge(total, import_own_records(store, p)); break;
        case Format::attestations: merge(total, import_attestations(store, p)); break;
        case Format::traces: merge(total, import_traces(store, p, options)); break;
        case Format::manifest: manifests.push_back(p); break;
      }
    } catch (const Error&) {
      throw;
    } catch (const nlohmann::json::exception& e) {
      throw Error(p, "content", "", e.what());
    }
  }
  if (!manifests.empty()) merge(total, import_manifests(store, manifests));
  tx.commit();
  return total;
}

}  // namespace kindex::store
