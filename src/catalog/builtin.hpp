#pragma once
// The problems kindex ships: the FlashInfer-Bench GQA paged decode family (any gqa_paged_decode_h{H}_kv{K}_d{D}
// _ps{P}; the 17 upstream definitions verbatim) and SOL-ExecBench L2/003, with their workloads. The data lives
// in definitions/ as JSON / JSONL and is compiled into the binary: nothing is read from the source tree at run time.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/definition.hpp"
#include "catalog/loader.hpp"
#include "kindex/kindex.h"

namespace kindex::catalog {

// A member of the decode family: the sizes, and FlashInfer's decode variants (kindex.h's version-2 fields) as its
// definition declares them, each with a suffix of the name, in this order after _ps{P} (definitions/decode_variants
// README.md):
//   _e4m3 / _e5m2  k_cache and v_cache float8_e4m3fn / float8_e5m2, with scalar inputs k_scale and v_scale
//   _hnd           k_cache and v_cache [num_pages, num_kv_heads, page_size, head_dim]
//   _q{N}          N (2..8) query tokens per request: const axis q_len_per_req, expr axis total_q = batch_size * N
//                  rows of q, output and lse (causal among a request's tokens)
//   _softcap       scalar input logits_soft_cap
//   _swa           scalar int32 input window_left
//   _sink          input sinks [num_qo_heads] float32
//   _rope          scalar inputs rope_scale and rope_theta (pos_encoding ROPE_LLAMA)
// The variant inputs follow sm_scale in that order. Plain (no suffix): FlashInfer-Bench's gqa_paged_decode_*.
struct DecodeParams {
  int64_t num_qo_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 0;
  kindex_kv_format kv_format = KINDEX_KV_FORMAT_SAME_AS_Q;
  bool hnd = false;
  int64_t q_len_per_req = 1;
  bool logits_soft_cap = false, window = false, sinks = false, rope = false;
  int64_t group_size() const { return num_qo_heads / num_kv_heads; }
  bool is_plain() const;
  std::string name() const;  // "gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h16_kv8_d256_ps16_softcap_swa"
};

// "gqa_paged_decode_h32_kv4_d128_ps1" -> {32, 4, 128, 1}, variant suffixes included; nullopt when the name is not
// of that form or the numbers are not a valid configuration (H a positive multiple of K, D and P positive, N in
// 2..8).
std::optional<DecodeParams> parse_decode_name(std::string_view name);
// The family's definition for these parameters: for a plain member exactly the upstream definition's axes,
// inputs, outputs and constraints (page_size 1 has no kv_last_page_len input), with a matching reference; for a
// variant the signature its suffixes give (above) and no reference (its dataset's files carry one).
Definition decode_definition(const DecodeParams& params);
// The decode parameters of any definition in the family (bundled, generated or loaded from a user's file, plain
// or variant), read from its const axes and inputs; nullopt for other definitions.
std::optional<DecodeParams> decode_family_params(const Definition& def);

constexpr std::string_view kSolGqaRopeBackward = "003_grouped_query_attention_with_rope_backward";
bool is_sol_gqa_rope_backward(const Definition& def);

// Bundled definition names: the 17 upstream decode definitions, then the SOL problem.
std::vector<std::string> list_builtin();
// The seed problems: what the main job (`kindex` with no arguments) runs and the CPU benchmarks measure, the two
// decode definitions of protocols.md (h32_kv4_d128_ps1, h24_kv4_d128_ps64) and SOL L2/003.
const std::vector<std::string>& seed_problems();
// A bundled definition by name (the SOL one also as "L2/003_grouped_query_attention_with_rope_backward"),
// or the generated definition for any other valid plain decode-family name; nullopt otherwise (variants come
// from a dataset, e.g. definitions/decode_variants, whose definitions carry their references).
std::optional<Definition> find_builtin(std::string_view name);
// The bundled workloads of a definition (empty for generated names): h32_kv4_d128_ps1 the 48 upstream cases
// (uuids and axes kept; index tensors from the page-table generator because the captured blobs are not public),
// h24_kv4_d128_ps64 the 20 cases of protocols.md, SOL L2/003 its 16 cases with tolerances, every other
// upstream decode definition three generated cases (batch 1, 4, 16).
std::vector<Workload> builtin_workloads(std::string_view definition_name);
// find_builtin + builtin_workloads; throws kindex::Error("builtin", "name", name, ...) for an unknown name.
Problem builtin_problem(std::string_view name);

// A stable RFC 4122-shaped uuid (version 8) derived from a key; the bundled generated workloads use
// "<definition>/b<batch>/p<num_pages>/i<num_kv_indices>" (definitions/generate_workloads.py does the same).
std::string stable_uuid(std::string_view key);

// A decode-family workload with index tensors generated and sm_scale = 1/sqrt(head_dim); uuid derived from
// the name and axes. For tests and ad-hoc sizes.
Workload make_decode_workload(const Definition& def, int64_t batch_size, int64_t num_pages, int64_t num_kv_indices);

// Whether the CPU path runs this workload in CI: decode when the KV tokens x query rows (heads x q_len_per_req)
// <= 2^20 and one cache holds <= 2^24 elements; SOL L2/003 when batch_size * seq_len <= 256; others when every
// input is <= 2^24 elements.
bool is_small(const Definition& def, const Workload& workload);

// A bundled data file by its path under definitions/ ("sol-execbench/L2/003_.../published-b200.json").
std::optional<std::string_view> builtin_file(std::string_view path);
std::vector<std::string> builtin_file_paths();

}  // namespace kindex::catalog
