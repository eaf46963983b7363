#pragma once
// `kindex catalog export`: bundled decode problems as a FlashInfer-Bench dataset folder that FlashInfer-Bench's own
// loaders and benchmark read. The harness fills a "random" int32 input with randint noise, so a workload's page
// table (kv_indptr, kv_indices, kv_last_page_len) is written as a safetensors file holding exactly the table
// generate_inputs gives that workload (the one page-table generator); floats stay "random", scalars and uuids
// are kept. A harness trace of such a workload names that file, which is how import recognises kindex's
// workload in it (is_exported_page_table).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kindex::catalog {

// The file the export writes for one workload's page table, relative to the dataset root (safetensors paths of
// a FlashInfer-Bench workload resolve against the root): "blob/kindex-page-tables/<definition>/<uuid>.safetensors"
// for the default length distribution (empty or "exponential"), and
// "blob/kindex-page-tables/<definition>/<lengths>/<uuid>.safetensors" for another (kv_indptr's "lengths"), so that a
// harness trace, which keeps only the path, still says which distribution made the table.
std::string page_table_blob_path(std::string_view definition, std::string_view uuid, std::string_view lengths = {});

// When a workload input given as safetensors is a page table the export wrote for this very workload (its
// definition and uuid), i.e. the data generate_inputs gives the workload's index tensors: the length distribution
// that made it ("" for the default); otherwise nullopt. A leading "./" is allowed.
std::optional<std::string> exported_page_table_lengths(std::string_view definition, std::string_view uuid,
                                                       std::string_view input_name, std::string_view path);
inline bool is_exported_page_table(std::string_view definition, std::string_view uuid, std::string_view input_name,
                                   std::string_view path) {
  return exported_page_table_lengths(definition, uuid, input_name, path).has_value();
}

struct ExportedDefinition {
  std::string name;
  size_t workloads = 0;
};

// Writes, under `root`, for each bundled decode definition named (it must have bundled workloads):
//   definitions/<op_type>/<name>.json   the bundled definition file, byte for byte;
//   workloads/<op_type>/<name>.jsonl    its workloads as FlashInfer-Bench workload trace lines;
//   blob/kindex-page-tables/<name>/[<lengths>/]<uuid>.safetensors  each workload's page table (int32 tensors named
//                                       as the inputs; the folder <lengths> for a non-default length distribution).
// Throws kindex::Error naming the definition for a name that is not a bundled decode definition with workloads.
std::vector<ExportedDefinition> export_flashinfer_bench(const std::vector<std::string>& names,
                                                        const std::filesystem::path& root);

// The same for a user's dataset directory (load_dataset; e.g. definitions/model_suite): every decode definition in
// it, or those `names` picks, written as above (the definition file byte for byte). A workload's own safetensors
// inputs (paths relative to the dataset root) are copied to the same place under `root`. Throws kindex::Error for a
// dataset that does not load, a name not in it, a definition that is not a gqa_paged_decode one or has no
// workloads, or `root` being the dataset itself.
std::vector<ExportedDefinition> export_flashinfer_bench_dataset(const std::filesystem::path& dataset,
                                                                const std::filesystem::path& root,
                                                                const std::vector<std::string>& names = {});

}  // namespace kindex::catalog
