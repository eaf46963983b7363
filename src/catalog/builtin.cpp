#include "catalog/builtin.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.hpp"
#include "core/random.hpp"

namespace kindex::catalog {

namespace embedded {
struct File {
  std::string_view path, content;
};
extern const File kFiles[];
extern const size_t kFileCount;
}  // namespace embedded

namespace {

constexpr std::string_view kFibDefinitions = "flashinfer-trace/definitions/";
constexpr std::string_view kFibWorkloads = "flashinfer-trace/workloads/";
constexpr std::string_view kSolAlias = "L2/003_grouped_query_attention_with_rope_backward";

// The reference of the family, as upstream writes it for page_size 1 and for larger pages; {SHAPES} and {OUTPUTS}
// stand for the lines both share (the sizes and their checks; the outputs' allocation and the group size).
constexpr std::string_view kReferenceShapes = R"PY(    batch_size, num_qo_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = k_cache.shape

    # Check constants
    assert num_qo_heads == {H}
    assert num_kv_heads == {K}
    assert head_dim == {D}
)PY";
constexpr std::string_view kReferenceOutputs = R"PY(    device = q.device
    output = torch.zeros(
        (batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device
    )
    lse = torch.full(
        (batch_size, num_qo_heads), -float("inf"), dtype=torch.float32, device=device
    )

    gqa_ratio = num_qo_heads // num_kv_heads
)PY";
constexpr std::string_view kReferencePs1 = R"PY(import torch
import math


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
{SHAPES}
    assert page_size == 1

    # Check constraints
    assert kv_indptr.shape[0] == batch_size + 1
    assert kv_indices.shape[0] == kv_indptr[-1].item()

{OUTPUTS}
    # page_size=1: squeeze page dim -> [num_pages, num_kv_heads, head_dim]
    k_flat = k_cache.squeeze(1).to(torch.float32)
    v_flat = v_cache.squeeze(1).to(torch.float32)
    q_f32 = q.to(torch.float32)

    for b in range(batch_size):
        ps = int(kv_indptr[b].item())
        pe = int(kv_indptr[b + 1].item())
        if ps >= pe:
            output[b].zero_()
            continue

        idx = kv_indices[ps:pe].to(torch.long)
        # k/v: [num_qo_heads, T, head_dim] (kv heads expanded to match qo heads)
        k = k_flat[idx].permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v = v_flat[idx].permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        q_b = q_f32[b].unsqueeze(1)  # [num_qo_heads, 1, head_dim]

        logits = torch.bmm(q_b, k.transpose(1, 2)).squeeze(1) * sm_scale  # [H, T]
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        attn = torch.softmax(logits, dim=-1)  # [H, T]
        output[b] = torch.bmm(attn.unsqueeze(1), v).squeeze(1).to(torch.bfloat16)

    return output, lse)PY";

constexpr std::string_view kReferencePaged = R"PY(import torch
import math


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
{SHAPES}
    assert page_size == {P}

{OUTPUTS}
    k_cache_f32 = k_cache.to(torch.float32)
    v_cache_f32 = v_cache.to(torch.float32)
    q_f32 = q.to(torch.float32)

    for b in range(batch_size):
        ps = int(kv_indptr[b].item())
        pe = int(kv_indptr[b + 1].item())
        last_len = int(kv_last_page_len[b].item())
        if ps >= pe:
            output[b].zero_()
            continue

        page_ids = kv_indices[ps:pe].to(torch.long)
        num_full_pages = len(page_ids) - 1

        # Gather tokens: full pages flat + last partial page
        if num_full_pages > 0:
            k_full = k_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
            v_full = v_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
        else:
            k_full = torch.empty(0, num_kv_heads, head_dim, device=device)
            v_full = torch.empty(0, num_kv_heads, head_dim, device=device)
        k_tokens = torch.cat([k_full, k_cache_f32[page_ids[-1], :last_len]], dim=0)
        v_tokens = torch.cat([v_full, v_cache_f32[page_ids[-1], :last_len]], dim=0)

        # [num_kv_heads, T, D] -> expand to [num_qo_heads, T, D]
        k = k_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v = v_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        q_b = q_f32[b].unsqueeze(1)  # [num_qo_heads, 1, head_dim]

        logits = torch.bmm(q_b, k.transpose(1, 2)).squeeze(1) * sm_scale  # [H, T]
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        attn = torch.softmax(logits, dim=-1)
        output[b] = torch.bmm(attn.unsqueeze(1), v).squeeze(1).to(torch.bfloat16)

    return output, lse)PY";

std::string replace_all(std::string s, std::string_view from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

bool parse_number(std::string_view& s, std::string_view prefix, int64_t& out) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  if (s.empty() || s[0] == '0') return false;  // no leading zeros: one spelling per configuration
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || out < 1 || out > 65536) return false;
  s.remove_prefix(size_t(end - s.data()));
  return true;
}

struct Catalog {
  std::vector<Problem> problems;  // bundled, in list_builtin order
};

const Catalog& catalog() {
  static const Catalog c = [] {
    Catalog c;
    auto file = [](std::string_view path) { return builtin_file(path); };
    auto where = [](std::string_view path) { return "builtin:definitions/" + std::string(path); };
    for (size_t i = 0; i < embedded::kFileCount; ++i) {
      std::string_view path = embedded::kFiles[i].path;
      if (path.starts_with(kFibDefinitions) && path.ends_with(".json")) {
        Problem p{parse_definition(embedded::kFiles[i].content, where(path), Source::flashinfer_bench), {}};
        std::string_view sub = path.substr(kFibDefinitions.size());
        std::string wl = std::string(kFibWorkloads) + std::string(sub.substr(0, sub.size() - 5)) + ".jsonl";
        if (auto text = file(wl)) p.workloads = parse_workloads(*text, p.definition, where(wl));
        c.problems.push_back(std::move(p));
      }
    }
    for (size_t i = 0; i < embedded::kFileCount; ++i) {
      std::string_view path = embedded::kFiles[i].path;
      if (path.starts_with("sol-execbench/") && path.ends_with("/definition.json")) {
        Problem p{parse_definition(embedded::kFiles[i].content, where(path), Source::sol_execbench), {}};
        std::string wl = std::string(path.substr(0, path.size() - 15)) + "workload.jsonl";
        if (auto text = file(wl)) p.workloads = parse_workloads(*text, p.definition, where(wl));
        c.problems.push_back(std::move(p));
      }
    }
    return c;
  }();
  return c;
}

const Problem* find_bundled(std::string_view name) {
  if (name == kSolAlias) name = kSolGqaRopeBackward;
  for (const Problem& p : catalog().problems)
    if (p.definition.name == name) return &p;
  return nullptr;
}

}  // namespace

bool DecodeParams::is_plain() const {
  return kv_format == KINDEX_KV_FORMAT_SAME_AS_Q && !hnd && q_len_per_req == 1 && !logits_soft_cap && !window &&
         !sinks && !rope;
}

std::string DecodeParams::name() const {
  std::string n = "gqa_paged_decode_h" + std::to_string(num_qo_heads) + "_kv" + std::to_string(num_kv_heads) + "_d" +
                  std::to_string(head_dim) + "_ps" + std::to_string(page_size);
  if (kv_format != KINDEX_KV_FORMAT_SAME_AS_Q) n += kv_format == KINDEX_KV_FORMAT_FP8_E4M3 ? "_e4m3" : "_e5m2";
  if (hnd) n += "_hnd";
  if (q_len_per_req != 1) n += "_q" + std::to_string(q_len_per_req);
  if (logits_soft_cap) n += "_softcap";
  if (window) n += "_swa";
  if (sinks) n += "_sink";
  if (rope) n += "_rope";
  return n;
}

std::optional<DecodeParams> parse_decode_name(std::string_view name) {
  DecodeParams p;
  std::string_view s = name;
  if (!parse_number(s, "gqa_paged_decode_h", p.num_qo_heads) || !parse_number(s, "_kv", p.num_kv_heads) ||
      !parse_number(s, "_d", p.head_dim) || !parse_number(s, "_ps", p.page_size))
    return std::nullopt;
  auto flag = [&](std::string_view suffix) {
    if (!s.starts_with(suffix)) return false;
    s.remove_prefix(suffix.size());
    return true;
  };
  if (flag("_e4m3"))
    p.kv_format = KINDEX_KV_FORMAT_FP8_E4M3;
  else if (flag("_e5m2"))
    p.kv_format = KINDEX_KV_FORMAT_FP8_E5M2;
  p.hnd = flag("_hnd");
  if (s.starts_with("_q") && !(parse_number(s, "_q", p.q_len_per_req) && p.q_len_per_req >= 2 && p.q_len_per_req <= 8))
    return std::nullopt;
  p.logits_soft_cap = flag("_softcap");
  p.window = flag("_swa");
  p.sinks = flag("_sink");
  p.rope = flag("_rope");
  if (!s.empty() || p.num_qo_heads % p.num_kv_heads != 0) return std::nullopt;
  return p;
}

Definition decode_definition(const DecodeParams& p) {
  if (p.num_qo_heads < 1 || p.num_kv_heads < 1 || p.head_dim < 1 || p.page_size < 1 ||
      p.num_qo_heads % p.num_kv_heads != 0)
    throw Error("builtin", "decode parameters", p.name(), "num_qo_heads must be a positive multiple of num_kv_heads");
  if (p.q_len_per_req < 1 || p.q_len_per_req > 8)
    throw Error("builtin", "q_len_per_req", std::to_string(p.q_len_per_req), "must be in [1, 8]");
  using ojson = nlohmann::ordered_json;
  auto tensor = [](std::vector<std::string> shape, const char* dtype, const char* description = nullptr) {
    ojson t = {{"shape", shape}, {"dtype", dtype}};
    if (description) t["description"] = description;
    return t;
  };
  auto scalar = [](const char* dtype, const char* description) {
    return ojson{{"shape", nullptr}, {"dtype", dtype}, {"description", description}};
  };
  const bool multi = p.q_len_per_req > 1;
  ojson axes = {{"batch_size", {{"type", "var"},
                                {"description", multi ? "Number of requests." : "Total number of query tokens."}}}};
  if (multi) {
    axes["q_len_per_req"] = {{"type", "const"}, {"value", p.q_len_per_req}};
    axes["total_q"] = {{"type", "expr"}, {"expression", "batch_size * q_len_per_req"}};
  }
  for (auto [axis, value] : {std::pair{"num_qo_heads", p.num_qo_heads},
                             {"num_kv_heads", p.num_kv_heads},
                             {"head_dim", p.head_dim},
                             {"page_size", p.page_size}})
    axes[axis] = {{"type", "const"}, {"value", value}};
  axes["num_pages"] = {{"type", "var"}};
  axes["len_indptr"] = {{"type", "var"}, {"description", "Length of kv_indptr array."}};
  axes["num_kv_indices"] = {{"type", "var"}, {"description", "Total number of KV page indices."}};
  const std::string rows = multi ? "total_q" : "batch_size";
  std::vector<std::string> cache = {"num_pages", "page_size", "num_kv_heads", "head_dim"};
  if (p.hnd) std::swap(cache[1], cache[2]);
  const char* kv_dtype = p.kv_format == KINDEX_KV_FORMAT_FP8_E4M3   ? "float8_e4m3fn"
                         : p.kv_format == KINDEX_KV_FORMAT_FP8_E5M2 ? "float8_e5m2"
                                                                    : "bfloat16";
  ojson inputs;
  inputs["q"] = tensor({rows, "num_qo_heads", "head_dim"}, "bfloat16");
  inputs["k_cache"] = tensor(cache, kv_dtype);
  inputs["v_cache"] = tensor(cache, kv_dtype);
  inputs["kv_indptr"] = tensor({"len_indptr"}, "int32", "KV page offsets for each sequence.");
  inputs["kv_indices"] = tensor({"num_kv_indices"}, "int32", "Page IDs for KV cache lookups.");
  if (p.page_size > 1)
    inputs["kv_last_page_len"] =
        tensor({"batch_size"}, "int32", "Number of valid tokens in the last page of each sequence.");
  inputs["sm_scale"] = scalar("float32", "Softmax scale. Default is (1/sqrt(head_dim)).");
  if (p.kv_format != KINDEX_KV_FORMAT_SAME_AS_Q) {
    inputs["k_scale"] = scalar("float32", "Dequantization scale of k_cache.");
    inputs["v_scale"] = scalar("float32", "Dequantization scale of v_cache.");
  }
  if (p.logits_soft_cap) inputs["logits_soft_cap"] = scalar("float32", "Logits soft-cap: cap * tanh(logit / cap).");
  if (p.window)
    inputs["window_left"] = scalar("int32", "Sliding window: a query at position i sees keys i - window_left .. i.");
  if (p.sinks) inputs["sinks"] = tensor({"num_qo_heads"}, "float32", "Attention sink logit of each query head.");
  if (p.rope) {
    inputs["rope_scale"] = scalar("float32", "RoPE position scale (Llama).");
    inputs["rope_theta"] = scalar("float32", "RoPE base (Llama).");
  }
  ojson outputs;
  outputs["output"] = tensor({rows, "num_qo_heads", "head_dim"}, "bfloat16");
  outputs["lse"] = tensor({rows, "num_qo_heads"}, "float32", "The 2-based log-sum-exp of attention logits.");

  std::string reference;
  if (p.is_plain()) {
    reference = p.page_size == 1 ? kReferencePs1 : kReferencePaged;
    reference = replace_all(reference, "{SHAPES}\n", std::string(kReferenceShapes));
    reference = replace_all(reference, "{OUTPUTS}\n", std::string(kReferenceOutputs));
    reference = replace_all(reference, "{H}", std::to_string(p.num_qo_heads));
    reference = replace_all(reference, "{K}", std::to_string(p.num_kv_heads));
    reference = replace_all(reference, "{D}", std::to_string(p.head_dim));
    reference = replace_all(reference, "{P}", std::to_string(p.page_size));
  }
  ojson j = {
      {"name", p.name()},
      {"description", "Batched Grouped Query Attention decode with a paged KV cache (page_size=" +
                          std::to_string(p.page_size) + "). " + std::to_string(p.num_qo_heads) + " q-heads, " +
                          std::to_string(p.num_kv_heads) + " kv-heads, head_dim=" + std::to_string(p.head_dim) +
                          ". Generated by kindex from the gqa_paged_decode family" +
                          (p.is_plain() ? "." : " (a variant's signature only: no reference).")},
      {"op_type", "gqa_paged"},
      {"tags", {"stage:decode", "status:generated", "fi_api:flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper"}},
      {"axes", axes},
      {"constraints", {"len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"}},
      {"inputs", inputs},
      {"outputs", outputs},
      {"reference", reference}};
  return parse_definition(j.dump(), "builtin:" + p.name(), Source::flashinfer_bench);
}

std::optional<DecodeParams> decode_family_params(const Definition& def) {
  DecodeParams p;
  for (auto [axis, dst] : {std::pair{"num_qo_heads", &p.num_qo_heads},
                           {"num_kv_heads", &p.num_kv_heads},
                           {"head_dim", &p.head_dim},
                           {"page_size", &p.page_size}}) {
    const Axis* a = def.axis(axis);
    if (!a || a->kind != Axis::Kind::constant) return std::nullopt;
    *dst = a->value;
  }
  if (p.num_qo_heads % p.num_kv_heads != 0) return std::nullopt;
  // The variant the definition declares (DecodeParams): its cache dtype and layout, q_len_per_req, its inputs.
  const TensorSpec* k_cache = def.input("k_cache");
  if (k_cache && k_cache->dtype == DType::f8e4m3) p.kv_format = KINDEX_KV_FORMAT_FP8_E4M3;
  if (k_cache && k_cache->dtype == DType::f8e5m2) p.kv_format = KINDEX_KV_FORMAT_FP8_E5M2;
  p.hnd = k_cache && k_cache->shape && k_cache->shape->size() == 4 && (*k_cache->shape)[1] == "num_kv_heads";
  if (const Axis* q_len = def.axis("q_len_per_req")) {
    if (q_len->kind != Axis::Kind::constant || q_len->value < 2 || q_len->value > 8) return std::nullopt;
    p.q_len_per_req = q_len->value;
  }
  p.logits_soft_cap = def.input("logits_soft_cap") != nullptr;
  p.window = def.input("window_left") != nullptr;
  p.sinks = def.input("sinks") != nullptr;
  p.rope = def.input("rope_theta") != nullptr;
  // The family member's signature, allowing fp16 for the bf16 tensors (the kernels take either).
  Definition family = decode_definition(p);
  const TensorSpec* q = def.input("q");
  if (q && q->dtype == DType::f16)
    for (auto* list : {&family.inputs, &family.outputs})
      for (TensorSpec& t : *list)
        if (t.dtype == DType::bf16) t.dtype = DType::f16;
  if (!same_signature(def, family)) return std::nullopt;
  return p;
}

bool is_sol_gqa_rope_backward(const Definition& def) {
  const Problem* p = find_bundled(kSolGqaRopeBackward);
  return def.name == kSolGqaRopeBackward && p && same_signature(def, p->definition);
}

std::vector<std::string> list_builtin() {
  std::vector<std::string> names;
  for (const Problem& p : catalog().problems) names.push_back(p.definition.name);
  return names;
}

const std::vector<std::string>& seed_problems() {
  static const std::vector<std::string> names = {"gqa_paged_decode_h32_kv4_d128_ps1",
                                                 "gqa_paged_decode_h24_kv4_d128_ps64", std::string(kSolGqaRopeBackward)};
  return names;
}

std::optional<Definition> find_builtin(std::string_view name) {
  if (const Problem* p = find_bundled(name)) return p->definition;
  if (auto params = parse_decode_name(name); params && params->is_plain()) return decode_definition(*params);
  return std::nullopt;
}

std::vector<Workload> builtin_workloads(std::string_view definition_name) {
  const Problem* p = find_bundled(definition_name);
  return p ? p->workloads : std::vector<Workload>{};
}

Problem builtin_problem(std::string_view name) {
  if (const Problem* p = find_bundled(name)) return *p;
  if (auto def = find_builtin(name)) return Problem{*def, {}};
  throw Error("builtin", "name", std::string(name),
              "not a bundled definition (kindex catalog list) nor a gqa_paged_decode_h{H}_kv{K}_d{D}_ps{P} name");
}

std::string stable_uuid(std::string_view key) {
  uint64_t hi = mix64(stream_id(std::string(key).c_str()));
  uint64_t lo = mix64(hi);
  hi = (hi & ~uint64_t(0xF000)) | 0x8000;                     // version 8 (custom)
  lo = (lo & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;  // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", unsigned(hi >> 32), unsigned((hi >> 16) & 0xFFFF),
                unsigned(hi & 0xFFFF), unsigned(lo >> 48), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

Workload make_decode_workload(const Definition& def, int64_t batch_size, int64_t num_pages, int64_t num_kv_indices) {
  auto params = decode_family_params(def);
  if (!params) throw Error("builtin", "definition", def.name, "not a gqa_paged_decode family definition");
  if (!params->is_plain())
    throw Error("builtin", "definition", def.name,
                "a decode variant: its workloads (and their variant inputs' values) come from its dataset");
  std::string key = def.name + "/b" + std::to_string(batch_size) + "/p" + std::to_string(num_pages) + "/i" +
                    std::to_string(num_kv_indices);
  nlohmann::ordered_json inputs;
  for (const TensorSpec& t : def.inputs)
    inputs[t.name] =
        t.is_scalar() ? nlohmann::ordered_json{{"type", "scalar"}, {"value", 1.0 / std::sqrt(double(params->head_dim))}}
                      : nlohmann::ordered_json{{"type", "random"}};
  nlohmann::ordered_json w = {{"uuid", stable_uuid(key)},
                              {"axes",
                               {{"batch_size", batch_size},
                                {"num_pages", num_pages},
                                {"len_indptr", batch_size + 1},
                                {"num_kv_indices", num_kv_indices}}},
                              {"inputs", inputs}};
  nlohmann::ordered_json line = {
      {"definition", def.name}, {"solution", nullptr}, {"workload", w}, {"evaluation", nullptr}};
  return parse_workload_line(line.dump(), def, "builtin:" + key, 1);
}

bool is_small(const Definition& def, const Workload& workload) {
  auto axes = resolve_axes(def, workload);
  if (auto p = decode_family_params(def)) {
    const int64_t tokens = axes.at("num_kv_indices") * p->page_size;  // an upper bound
    const int64_t cache = axes.at("num_pages") * p->page_size * p->num_kv_heads * p->head_dim;
    return tokens * p->num_qo_heads * p->q_len_per_req <= (int64_t(1) << 20) && cache <= (int64_t(1) << 24);
  }
  if (is_sol_gqa_rope_backward(def)) return axes.at("batch_size") * axes.at("seq_len") <= 256;
  for (const TensorSpec& t : def.inputs) {
    int64_t n = 1;
    for (int64_t d : concrete_shape(t, axes)) {
      if (d > (int64_t(1) << 24) / n) return false;
      n *= d;
    }
  }
  return true;
}

std::optional<std::string_view> builtin_file(std::string_view path) {
  for (size_t i = 0; i < embedded::kFileCount; ++i)
    if (embedded::kFiles[i].path == path) return embedded::kFiles[i].content;
  return std::nullopt;
}

std::vector<std::string> builtin_file_paths() {
  std::vector<std::string> out;
  for (size_t i = 0; i < embedded::kFileCount; ++i) out.emplace_back(embedded::kFiles[i].path);
  return out;
}

}  // namespace kindex::catalog
