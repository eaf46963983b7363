// The export writer: the store in KernelIndex's export shape, one {"table","row"} line per row in the exporter's
// table order (what `kindex import` reads back, digests intact).
#include "store/export.hpp"

#include <zstd.h>

#include <cmath>
#include <fstream>
#include <set>

#include "core/error.hpp"
#include "evidence/export.hpp"
#include "store/rows.hpp"

namespace kindex::store {

using nlohmann::json;

namespace {

// "a, b" -> "t.a, t.b"
std::string qualified(const std::string& cols, const std::string& prefix) {
  std::string out = prefix;
  for (char c : cols) {
    out += c;
    if (c == ' ') out += prefix;
  }
  return out;
}

}  // namespace

json export_store(Store& store, const std::string& path) {
  static const std::set<std::string> json_columns = {"policy", "manifest", "tags", "dtypes", "layoutKeys",
                                                     "targetArchitectures"};
  static const std::set<std::string> bool_columns = {"sourceAvailable", "installable", "reported",
                                                     "reproducedByKernelindex", "hasRawEvidence", "sourceNative",
                                                     "streaming"};
  static const std::set<std::string> kindex_only = {"origin", "realGpu", "kindexFloorNs"};
  std::string text;
  json counts = json::object();
  for (const std::string& table : evidence::kExportTables) {
    const auto& keys = table_keys(table);
    std::string cols;
    for (const auto& k : keys) cols += (cols.empty() ? "" : ", ") + snake_case(k);
    int64_t n = 0;
    const bool runs = table == "benchmark_runs";
    std::string sql = runs ? "SELECT " + qualified(cols, "t.") + ", m.manifest FROM benchmark_runs t LEFT JOIN run_manifests m ON m.run_id = t.id ORDER BY t.id"
                           : "SELECT " + cols + " FROM " + table + " ORDER BY " + snake_case(keys[0]) +
                                 (table == "operation_aliases" ? ", alias" : "");
    for (const auto& r : store.db().query(sql)) {
      json row = json::object();
      for (size_t i = 0; i < keys.size(); ++i) {
        const std::string& k = keys[i];
        if (kindex_only.count(k) || (k == "kind" && table == "workloads")) continue;
        if (r.is_null(i)) {
          row[k] = nullptr;
        } else if (json_columns.count(k)) {
          row[k] = json::parse(r.text(i));
        } else if (k == "tokenizer") {  // an object or a name, as the export gave it
          const json parsed = json::parse(r.text(i), nullptr, /*allow_exceptions=*/false);
          row[k] = parsed.is_object() ? parsed : json(r.text(i));
        } else if (bool_columns.count(k)) {
          row[k] = r.integer(i) != 0;
        } else if (auto s = std::get_if<std::string>(&r.cells[i])) {
          row[k] = *s;
        } else if (auto d = std::get_if<double>(&r.cells[i])) {
          double v = *d;
          row[k] = v == std::floor(v) && std::fabs(v) < 9e15 ? json(static_cast<int64_t>(v)) : json(v);
        } else {
          row[k] = r.integer(i);
        }
      }
      // A run's manifest is its own table (run_manifests), joined in as the last column.
      if (runs) {
        if (r.is_null(keys.size())) throw Error(path, "benchmark_runs", row["id"].get<std::string>(), "run has no stored manifest");
        row["manifest"] = json::parse(r.text(keys.size()));
      }
      text += json{{"table", table}, {"row", row}}.dump() + "\n";
      ++n;
    }
    counts[table] = n;
  }
  int64_t attestations = 0;
  for (const auto& r : store.db().query(
           "SELECT id, rerun_digest, original_run_digest, key_id, document, created_at FROM run_attestations ORDER BY id")) {
    const json row = {{"id", r.text(0)}, {"rerunDigest", r.text(1)}, {"originalRunDigest", r.text(2)}, {"keyId", r.text(3)},
                      {"document", json::parse(r.text(4))}, {"createdAt", r.is_null(5) ? json() : json(r.text(5))}};
    text += json{{"table", kAttestationsTable}, {"row", row}}.dump() + "\n";
    ++attestations;
  }
  counts[kAttestationsTable] = attestations;
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path, "path", path, "cannot write the export");
  if (path.size() > 4 && path.substr(path.size() - 4) == ".zst") {
    std::string buf(ZSTD_compressBound(text.size()), '\0');
    size_t n = ZSTD_compress(buf.data(), buf.size(), text.data(), text.size(), 9);
    if (ZSTD_isError(n)) throw Error(path, "zstd", "", ZSTD_getErrorName(n));
    out.write(buf.data(), static_cast<std::streamsize>(n));
  } else {
    out << text;
  }
  return counts;
}

}  // namespace kindex::store
