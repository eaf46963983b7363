#pragma once
// KernelIndex catalog export (.jsonl.zst): one {"table": ..., "row": {...}} object per line, zstd-compressed.
// Streaming reader (libzstd), the line parser, and verify_export, which recomputes every digest column from the
// stored manifests.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

// Tables of the export format in the order KernelIndex's exporter writes them (apps/web/scripts/export-catalog.ts):
// artifacts rows carry no content (the exporter strips it), only the content digest and where it lives.
// The serving tables (model_revisions ... serving_measurements) follow, in the order the public serving export
// writes them (each row after the rows it names).
inline const std::vector<std::string> kExportTables = {
    "sources",         "projects",        "operations",           "operation_aliases", "workloads",
    "implementations", "benchmark_runs",  "measurements",         "record_events",     "artifacts",
    "model_revisions", "serving_stack_revisions", "serving_configurations", "serving_workloads", "serving_runs",
    "serving_measurements"};
bool is_export_table(const std::string& table);

struct ExportRow {
  std::string table;
  nlohmann::json row;  // an object
};

// Parses one line (strict JSON; duplicate keys refused); `where` names file and line for errors. Rows that are
// not objects are errors; a table this version does not know is returned as is (readers skip it with a warning,
// so a later export with a new table still verifies and imports).
ExportRow parse_export_line(std::string_view line, const std::string& where);

// Streams the decompressed lines of a .jsonl.zst (or plain .jsonl) file to `on_line` (without the newline),
// with the 1-based line number. Lines above 64 MiB are an error.
void for_each_export_line(const std::string& path,
                          const std::function<void(std::string_view line, std::size_t line_number)>& on_line);
// Parses every row of an export and hands it on.
void for_each_export_row(const std::string& path, const std::function<void(ExportRow&&)>& on_row);

// The export in memory: rows per table, in file order.
struct ExportData {
  std::map<std::string, std::vector<nlohmann::json>> tables;
  std::map<std::string, std::size_t> skipped_tables;  // unknown tables: rows skipped
  const std::vector<nlohmann::json>& rows(const std::string& table) const;
};
ExportData read_export(const std::string& path);

// Result of recomputing one digest column.
struct ColumnCheck {
  std::size_t matched = 0;
  std::size_t mismatched = 0;
};
struct VerifyReport {
  // Keyed by column: semanticDigest, workloadDigest, implementationDigest, runDigest, protocolKey,
  // environmentKey, correctnessKey, comparisonKey, the run manifest's references (run.spec.*Digest), the facts a
  // run row restates from its manifest (benchmark_runs.primaryValue, ...: keys.hpp run_row_facts), every
  // measurement row against its run's manifest (measurements.value, ...), record_events.comparisonKey, and
  // artifacts.contentDigest / artifacts.sizeBytes (format, and the size an implementation's source states).
  std::map<std::string, ColumnCheck> columns;
  std::vector<std::string> mismatches;  // "<table> <id> <column>: stored X, computed Y" (or the error)
  std::map<std::string, std::size_t> row_counts;
  std::map<std::string, std::size_t> skipped_tables;  // unknown tables, rows not verified
  bool ok() const { return mismatches.empty(); }
};
VerifyReport verify_export(const ExportData& data);
VerifyReport verify_export(const std::string& path);

}  // namespace kindex::evidence
