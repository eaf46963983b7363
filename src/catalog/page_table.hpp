#pragma once
// Page tables (kv_indptr, kv_indices, kv_last_page_len) shaped like those captured from serving engines; the
// algorithm and its properties are documented in docs/catalog.md.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kindex/kindex.h"

namespace kindex::catalog {

// How the page budget is split over the sequences (before the shared prefix, decode-step and scattered ids):
//  exponential  exponential weights: uneven, a few long sequences and many short ones (the default; the tables of
//               every workload written before the option existed);
//  equal        num_kv_indices / batch_size pages each, the remainder one page each to the first sequences;
//  long_tail    stratified lognormal weights (sigma 2): the longest tenth of the sequences holds most pages;
//  one_long     one sequence (its position drawn) gets about half the pages, the others share the rest equally.
enum class LengthDistribution { exponential, equal, long_tail, one_long };
std::string_view length_distribution_name(LengthDistribution d);
std::optional<LengthDistribution> parse_length_distribution(std::string_view name);
// "exponential, equal, long_tail, one_long", for error messages.
std::string_view length_distribution_names();

struct PageTableOptions {
  LengthDistribution lengths = LengthDistribution::exponential;
  bool allow_empty = false;  // sequences may hold no page (and, in adversarial mode, one is forced empty)
  // Test mode: forces repeated ids inside a sequence, 1-token and 1-page sequences, last pages of 1 and of
  // page_size tokens (and an empty sequence when allow_empty).
  bool adversarial = false;
  // Every non-empty sequence holds at least this many tokens (a request's q_len_per_req query tokens are in the
  // cache): a last page drawn shorter is lengthened, no other draw changes, so 1 gives the tables of before. Throws
  // when a sequence's pages cannot hold them (page_size too small for a one-page sequence).
  int64_t min_tokens = 1;
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

// The C ABI parameters of a decode over a page table on the host: the sizes and the table's pointers (batch and
// num_kv_indices from the vectors); dtype, tensors, scale and outputs are the caller's to set. kv_last_page_len may
// be null (every last page full).
struct DecodeSizes {
  int32_t num_qo_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 0;
  int64_t num_pages = 0;
};
kindex_paged_decode_params decode_params(const DecodeSizes& sizes, const std::vector<int32_t>& kv_indptr,
                                         const std::vector<int32_t>& kv_indices, const int32_t* kv_last_page_len);

}  // namespace kindex::catalog
