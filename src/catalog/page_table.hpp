#pragma once
// Page tables (kv_indptr, kv_indices, kv_last_page_len) shaped like those captured from serving engines; the
// algorithm and its properties are documented in docs/catalog.md.
#include <cstdint>
#include <vector>

namespace kindex::catalog {

struct PageTableOptions {
  bool allow_empty = false;  // sequences may hold no page (and, in adversarial mode, one is forced empty)
  // Test mode: forces repeated ids inside a sequence, 1-token and 1-page sequences, last pages of 1 and of
  // page_size tokens (and an empty sequence when allow_empty).
  bool adversarial = false;
};

struct PageTable {
  std::vector<int32_t> kv_indptr;           // [batch_size + 1], kv_indptr[0] == 0, non-decreasing
  std::vector<int32_t> kv_indices;          // [num_kv_indices], every id in [0, num_pages)
  std::vector<int32_t> kv_last_page_len;    // [batch_size], in [1, page_size] (1 for page_size 1)
  int32_t shared_prefix_page = -1;          // the id that starts every non-empty sequence
  int64_t tokens(int64_t page_size) const;  // total KV tokens referenced
};

// Deterministic in all arguments. Throws kindex::Error when the counts cannot form a valid table (e.g.
// num_kv_indices < batch_size without allow_empty, num_pages < 1, counts beyond int32).
PageTable generate_page_table(int64_t batch_size, int64_t num_pages, int64_t num_kv_indices, int64_t page_size,
                              uint64_t seed, const PageTableOptions& options = {});

}  // namespace kindex::catalog
