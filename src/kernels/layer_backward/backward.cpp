// The L2/003 backward's orchestration (see backward.hpp for the plan) and its C ABI entry points.
#include "kernels/layer_backward/backward.hpp"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "kernels/capi.hpp"
#include "kernels/layer_backward/attention.hpp"
#include "kernels/layer_backward/gemm.hpp"

namespace kindex::kernels::backward {
namespace {

constexpr const char* kWhere = "kindex_gqa_rope_backward";
constexpr size_t kAlign = 256;
constexpr int64_t kMaxBatch = 65535;       // gridDim.z of the attention kernels
constexpr int64_t kMaxSeqLen = int64_t(1) << 20;
constexpr int64_t kMaxTokens = int64_t(1) << 24;  // keeps every GEMM dimension far inside int32

size_t round_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Workspace carve-up; offsets from the 256-byte aligned start.
struct Layout {
  size_t grad_attn_output = 0, grad_qkv = 0, row_sums = 0, attn_scratch = 0, grad_scores = 0, column_partials = 0,
         gemm_main = 0, gemm_side = 0, end = 0;
};
Layout layout(int64_t b, int64_t s) {
  Layout l;
  const size_t tokens = size_t(b) * size_t(s);
  l.grad_qkv = round_up(tokens * kQProj * 2);
  l.row_sums = l.grad_qkv + round_up(tokens * kQkvProj * 2);
  l.attn_scratch = l.row_sums + round_up(size_t(b) * kHeads * size_t(padded_seq_len(s)) * 4);
  l.grad_scores = l.attn_scratch + round_up(padded_attn_bytes(b, s));
  l.column_partials = l.grad_scores + round_up(grad_scores_bytes(b, s));
  l.gemm_main = l.column_partials + round_up(column_partials_bytes(b, s));
  l.gemm_side = l.gemm_main + kGemmWorkspaceBytes;
  l.end = l.gemm_side + kGemmWorkspaceBytes;
  return l;
}

// The internal streams and the fork/join events, one set per device. Calls are serialised by `mutex` so that each
// cudaStreamWaitEvent sees its own call's record. `stream` runs the weight-gradient GEMMs and (StreamPlan::v3, the
// default) the dV kernel; `column` (highest priority: it is on the critical path) the dK kernel; `value` the dV
// kernel under the other stream plans.
struct SideStream {
  cudaStream_t stream = nullptr, column = nullptr, value = nullptr;
  cudaEvent_t fork = nullptr, inputs_ready = nullptr, grad_q_ready = nullptr, grad_v_ready = nullptr,
              grad_kv_ready = nullptr, join = nullptr;
};
struct Streams {
  std::mutex mutex;
  std::map<int, SideStream> per_device;
};
Streams& streams() {
  static Streams s;
  return s;
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw capi::Failure(KINDEX_STATUS_CUDA_ERROR, format_error(kWhere, "", "",
                                                              std::string(what) + ": " + cudaGetErrorName(err) +
                                                                  ": " + cudaGetErrorString(err)));
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

size_t workspace_bytes(int64_t batch_size, int64_t seq_len) { return layout(batch_size, seq_len).end + kAlign; }

void validate_sizes(const kindex_gqa_rope_backward_params& p) {
  if (p.batch_size < 1 || p.batch_size > kMaxBatch)
    throw Error(kWhere, "batch_size", std::to_string(p.batch_size), "must be in [1, " + std::to_string(kMaxBatch) + "]");
  if (p.seq_len < 1 || p.seq_len > kMaxSeqLen)
    throw Error(kWhere, "seq_len", std::to_string(p.seq_len), "must be in [1, " + std::to_string(kMaxSeqLen) + "]");
  if (int64_t(p.batch_size) * p.seq_len > kMaxTokens)
    throw Error(kWhere, "batch_size * seq_len", std::to_string(int64_t(p.batch_size) * p.seq_len),
                "must be at most " + std::to_string(kMaxTokens));
}

void validate(const kindex_gqa_rope_backward_params& p, const void* workspace, size_t bytes) {
  validate_sizes(p);
  const std::pair<const char*, const void*> pointers[] = {
      {"grad_output", p.grad_output},     {"hidden_states", p.hidden_states}, {"cos", p.cos},
      {"sin", p.sin},                     {"q_weight", p.q_weight},           {"k_weight", p.k_weight},
      {"v_weight", p.v_weight},           {"o_weight", p.o_weight},           {"query_states", p.query_states},
      {"key_states", p.key_states},       {"value_states", p.value_states},   {"attn_weights", p.attn_weights},
      {"attn_output", p.attn_output},     {"grad_hidden_states", p.grad_hidden_states},
      {"grad_q_weight", p.grad_q_weight}, {"grad_k_weight", p.grad_k_weight}, {"grad_v_weight", p.grad_v_weight},
      {"grad_o_weight", p.grad_o_weight}};
  for (auto [name, ptr] : pointers) {
    if (!ptr) throw Error(kWhere, name, "NULL", "is required");
    // 16-byte vector loads and cuBLASLt's tensor-memory-access kernels need it; cudaMalloc gives 256.
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) throw Error(kWhere, name, hex(ptr), "must be 16-byte aligned");
  }
  if (!std::isfinite(p.scaling)) throw Error(kWhere, "scaling", std::to_string(p.scaling), "must be finite");
  const size_t needed = workspace_bytes(p.batch_size, p.seq_len);
  if (bytes < needed)
    throw capi::Failure(KINDEX_STATUS_WORKSPACE_TOO_SMALL,
                        format_error(kWhere, "workspace_bytes", std::to_string(bytes),
                                     "too small: needs at least " + std::to_string(needed) +
                                         " (kindex_gqa_rope_backward_workspace_size)"));
  if (!workspace) throw Error(kWhere, "workspace", "NULL", "is required");
}

RunOptions resolve(const RunOptions& options) {
  RunOptions resolved = options;
  const AttentionPlan plan = default_plan(options.kernels.value_or(default_kernels()));
  resolved.kernels = plan.kernels;
  resolved.schedule = options.schedule.value_or(plan.schedule);
  if (options.tiling == AttentionTiling{}) resolved.tiling = plan.tiling;
  return resolved;
}

void run(const kindex_gqa_rope_backward_params& p, void* workspace, size_t, void* stream_ptr, Parts parts,
         const RunOptions& given) {
  const RunOptions options = resolve(given);
  const auto main = static_cast<cudaStream_t>(stream_ptr);
  const int64_t B = p.batch_size, S = p.seq_len, N = B * S;
  auto* ws = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(workspace)));
  const Layout l = layout(B, S);
  void* dO = ws + l.grad_attn_output;
  auto* dqkv = reinterpret_cast<uint16_t*>(ws + l.grad_qkv);
  void* ws_main = ws + l.gemm_main;
  void* ws_side = ws + l.gemm_side;
  const bool gemms = parts != Parts::attention, attention = parts != Parts::gemms;

  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  Streams& st = streams();
  std::lock_guard<std::mutex> lock(st.mutex);
  auto found = st.per_device.find(device);
  if (found == st.per_device.end()) {
    SideStream entry;
    int lowest = 0, highest = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&lowest, &highest);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&entry.stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&entry.column, cudaStreamNonBlocking, highest);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&entry.value, cudaStreamNonBlocking);
    for (cudaEvent_t* ev : {&entry.fork, &entry.inputs_ready, &entry.grad_q_ready, &entry.grad_v_ready,
                            &entry.grad_kv_ready, &entry.join})
      if (e == cudaSuccess) e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
    check_cuda(e, "creating the side stream");
    found = st.per_device.emplace(device, entry).first;
  }
  const SideStream& ss = found->second;
  const cudaStream_t side = ss.stream;

  std::string message;
  auto gemm = [&](const GemmCall& c, cudaStream_t s) {
    if (!gemm_bf16(c.shape, c.a, c.b, c.c, c.workspace, kGemmWorkspaceBytes, s, message))
      throw capi::Failure(KINDEX_STATUS_NOT_SUPPORTED, format_error(kWhere, "", "", message));
  };
  auto record = [&](cudaEvent_t ev, cudaStream_t from, cudaStream_t to) {
    cudaError_t e = cudaEventRecord(ev, from);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(to, ev, 0);
    return e;
  };

  // The eight cuBLASLt GEMMs (row-major shapes, see gemm.hpp).
  // grad_o_weight [5120, 4096] = grad_output^T [5120, N] attn_output [N, 4096]
  const GemmCall grad_o_weight{{kHidden, kQProj, N, true, false, kHidden, kQProj, kQProj, false},
                               p.grad_output, p.attn_output, p.grad_o_weight, ws_side};
  // dO [N, 4096] = grad_output [N, 5120] o_weight [5120, 4096]
  const GemmCall grad_attn_output{{N, kQProj, kHidden, false, false, kHidden, kQProj, kQProj, false},
                                  p.grad_output, p.o_weight, dO, ws_main};
  // grad_{q,k,v}_weight = dQKV[:, slice]^T [rows, N] hidden_states [N, 5120]
  auto weight_grad = [&](int64_t col, int64_t rows, void* out) {
    return GemmCall{{rows, kHidden, N, true, false, kQkvProj, kHidden, kHidden, false},
                    dqkv + col, p.hidden_states, out, ws_side};
  };
  const GemmCall grad_weights[3] = {weight_grad(0, kQProj, p.grad_q_weight),
                                    weight_grad(kQProj, kKvProj, p.grad_k_weight),
                                    weight_grad(kQProj + kKvProj, kKvProj, p.grad_v_weight)};
  // grad_hidden [N, 5120] = dQ Wq + dK Wk + dV Wv, chained with beta = 1 (bf16 after each, as the reference sums
  // three bf16 branch results); the dQ branch first, since dQ is ready before dK and dV.
  auto branch = [&](int64_t col, int64_t k, const void* weight, bool accumulate) {
    return GemmCall{{N, kHidden, k, false, false, kQkvProj, kHidden, kHidden, accumulate},
                    dqkv + col, weight, p.grad_hidden_states, ws_main};
  };
  const GemmCall grad_hidden[3] = {branch(0, kQProj, p.q_weight, false),
                                   branch(kQProj, kKvProj, p.k_weight, true),
                                   branch(kQProj + kKvProj, kKvProj, p.v_weight, true)};

  // Timeline (main | column | side):
  //   main:   dO, [pad], row_sums pass, grad_q pass, gh_Q, (wait dK dV) gh_K, gh_V, (join side)
  //   column:                                 (wait dQ dS) dK kernel
  //   side:   dWo, (wait dO) dV kernel,        (wait dQ dS) dWq, (wait dK dV) dWk, dWv
  // so dV runs beside the row passes, and dWq and gh_Q beside the dK kernel.
  if (gemms) {
    const GemmCall all[] = {grad_o_weight,   grad_attn_output, grad_weights[0], grad_weights[1],
                            grad_weights[2], grad_hidden[0],   grad_hidden[1],  grad_hidden[2]};
    if (!tune_gemms(all, std::size(all), main, message))
      throw capi::Failure(KINDEX_STATUS_CUDA_ERROR, format_error(kWhere, "", "", message));
    check_cuda(record(ss.fork, main, side), "fork");
    gemm(grad_o_weight, side);
    gemm(grad_attn_output, main);
  }
  if (attention) {
    const AttentionArgs args{.grad_attn_output = dO,
                             .query_states = p.query_states,
                             .key_states = p.key_states,
                             .value_states = p.value_states,
                             .attn_weights = p.attn_weights,
                             .cos = p.cos,
                             .sin = p.sin,
                             .row_sums = reinterpret_cast<float*>(ws + l.row_sums),
                             .attn_scratch = ws + l.attn_scratch,
                             .grad_scores = ws + l.grad_scores,
                             .attn_row_stride = 0,
                             .grad_qkv = dqkv,
                             .batch_size = int(B),
                             .seq_len = int(S),
                             .scaling = p.scaling,
                             .schedule = *options.schedule,
                             .tiling = options.tiling,
                             .column_partials = reinterpret_cast<float*>(ws + l.column_partials),
                             .max_column_splits = options.max_column_splits,
                             .column_splits = 1,
                             .kernels = *options.kernels};
    const AttentionStreams as{.main = main,
                              .rows = options.streams == StreamPlan::rows_high ? ss.column : main,
                              .column = ss.column,
                              .value = options.streams == StreamPlan::v3           ? side
                                       : options.streams == StreamPlan::value_high ? ss.column
                                                                                    : ss.value,
                              .inputs_ready = ss.inputs_ready,
                              .grad_q_ready = ss.grad_q_ready,
                              .grad_v_ready = ss.grad_v_ready,
                              .grad_kv_ready = ss.grad_kv_ready};
    check_cuda(launch_attention(args, as), "attention kernels");
  }
  if (gemms) {
    // launch_attention recorded grad_q_ready after the grad_q pass (on main or on the column stream); without it,
    // mark the same point here.
    cudaError_t e = attention ? cudaSuccess : cudaEventRecord(ss.grad_q_ready, main);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(side, ss.grad_q_ready, 0);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(main, ss.grad_q_ready, 0);
    check_cuda(e, "grad_q_ready");
    gemm(grad_weights[0], side);
    gemm(grad_hidden[0], main);
    if (attention) check_cuda(cudaStreamWaitEvent(side, ss.grad_kv_ready, 0), "cudaStreamWaitEvent");
    gemm(grad_weights[1], side);
    gemm(grad_weights[2], side);
  }
  if (attention) check_cuda(cudaStreamWaitEvent(main, ss.grad_kv_ready, 0), "cudaStreamWaitEvent");
  if (gemms) {
    gemm(grad_hidden[1], main);
    gemm(grad_hidden[2], main);
    check_cuda(record(ss.join, side, main), "join");
  }
  check_cuda(cudaGetLastError(), "launch");
}

}  // namespace kindex::kernels::backward

extern "C" {

kindex_status kindex_gqa_rope_backward_workspace_size(const kindex_gqa_rope_backward_params* params, size_t* bytes) {
  using namespace kindex::kernels::backward;
  constexpr const char* where = "kindex_gqa_rope_backward_workspace_size";
  if (kindex_status s = kindex::capi::check_params(where, params); s != KINDEX_STATUS_OK) return s;
  if (!bytes)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT, kindex::format_error(where, "bytes", "NULL", "is required"));
  *bytes = 0;
  return kindex::capi::guarded(where, [&] {
    validate_sizes(*params);
    *bytes = workspace_bytes(params->batch_size, params->seq_len);
  });
}

kindex_status kindex_gqa_rope_backward(const kindex_gqa_rope_backward_params* params, void* workspace,
                                       size_t workspace_bytes, void* stream) {
  using namespace kindex::kernels::backward;
  if (kindex_status s = kindex::capi::check_params("kindex_gqa_rope_backward", params); s != KINDEX_STATUS_OK)
    return s;
  return kindex::capi::guarded("kindex_gqa_rope_backward", [&] {
    validate(*params, workspace, workspace_bytes);
    run(*params, workspace, workspace_bytes, stream, Parts::all);
  });
}

}  // extern "C"
