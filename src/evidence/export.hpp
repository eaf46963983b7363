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

// Tables of the export format, in dependency order.
inline const std::vector<std::string> kExportTables = {"sources",    "projects",        "operations",
                                                       "operation_aliases", "workloads", "implementations",
                                                       "benchmark_runs", "measurements", "record_events"};

struct ExportRow {
  std::string table;
  nlohmann::json row;  // an object
};

// Parses one line (strict JSON; duplicate keys refused); `where` names file and line for errors. Unknown tables
// and rows that are not objects are errors.
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
  // environmentKey, correctnessKey, comparisonKey (plus run references: run.workloadDigest, run.implementationDigest).
  std::map<std::string, ColumnCheck> columns;
  std::vector<std::string> mismatches;  // "<table> <id> <column>: stored X, computed Y" (or the error)
  std::map<std::string, std::size_t> row_counts;
  bool ok() const { return mismatches.empty(); }
};
VerifyReport verify_export(const ExportData& data);
VerifyReport verify_export(const std::string& path);

}  // namespace kindex::evidence
