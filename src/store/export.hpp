#pragma once
// Writes the store as a KernelIndex export.
#include <nlohmann/json.hpp>

#include <string>

#include "store/store.hpp"

namespace kindex::store {

// kindex's own table in an export, after KernelIndex's: the signed rerun attestations (run_attestations), one row
// {id, rerunDigest, originalRunDigest, keyId, document, createdAt} each, the document as signed (an object). A
// KernelIndex export has no such table (its community attestations are not exported); a reader that does not know
// the table skips it (kindex's own importer does, with a warning, for a table it does not know), so the export is
// still KernelIndex's. The store's trusted keys are not exported: trust is the importing store's decision
// (`kindex attest trust`), and its check re-verifies every signature on import and again on display.
inline constexpr const char* kAttestationsTable = "kindex_run_attestations";

// Writes the store in the KernelIndex export shape (.jsonl.zst when the path ends in .zst, else .jsonl), then the
// attestations table above; returns row counts per table.
nlohmann::json export_store(Store& store, const std::string& path);

}  // namespace kindex::store
