// bench_decode: times kindex_paged_decode on the 68 seed workloads (48 gqa_paged_decode_h32_kv4_d128_ps1,
// 20 gqa_paged_decode_h24_kv4_d128_ps64) with the FlashInfer-Bench protocol: cold L2 (a 2 x L2-size buffer zeroed
// before every call), 1 + 5 untimed calls, 10 warm-up, 50 timed, median.
// Page tables come from the catalog's generator (the same tables the tests check); q/k/v are random bf16 drawn on
// the device. Each call is timed by the runner's device timer (src/measure/timer.hpp: CUPTI activity spans, first
// GPU activity to last, as FlashInfer-Bench; CUDA events only when CUPTI cannot load) and, for the first variant,
// also with CUDA events around the call (which add the host's launch latency).
// Prints a table and writes JSON (--json FILE): per workload latency statistics, the bytes a call
// must move (runner::paged_decode_work, defined in docs/protocols.md "Floors"), achieved TB/s and the ratio to the
// floor bytes / the H200's measured device copy (runner::published_measured_rates, docs/protocols.md section 4).
//
//   bench_decode [--json FILE] [--dump-tables DIR] [--filter SUBSTRING] [--variants LIST] [--iters N]
//                [--synthetic B:N:PS,...] [--flush memset|read|none]
//   --variants: comma-separated variants, each a run of letter-number knobs: s<segments> (0 = the cost model's
//               choice, else that many, capped to one wave) and r<0|1> (1: time the run alone, planned once
//               before timing, as every layer after the first sees it; 0: plan + run, the one-call entry point)
//               and f<0|1|2> (the KV cache as q's bf16, fp8 e4m3 or fp8 e5m2: the random bf16 buffers' bytes read
//               as fp8, every byte a finite value to the kernel); e.g. s0,s0r1,s132,s0f1; the first is the one
//               reported as "kindex".
//   --synthetic: extra workloads B:N:PS[:HQ:HKV:D] (generated page tables, exponential lengths; h32/kv4/d128 unless
//                given): batch B, N page ids, page size PS, query heads HQ, KV heads HKV, head_dim D.
//   --flush: cold L2 by zeroing a 2 x L2 buffer (the protocol, default), by reading one, or not at all
//            (diagnostics only).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check_cuda.hpp"

#include "runner/execute/libraries.hpp"
#include "runner/measurement.hpp"
#include "runner/record/floors.hpp"
#include "catalog/builtin.hpp"
#include "catalog/inputs.hpp"
#include "catalog/page_table.hpp"
#include "kernels/decode/paged_decode.hpp"
#include "kindex/kindex.h"

namespace {

// The floor's rate: this GPU's device-to-device copy, measured by the GPU reference library as the runner measures
// it (docs/protocols.md "Floors"); the H200's published measurement where that library is missing.
struct FloorRate {
  double bytes_per_s;
  std::string source;
};
FloorRate floor_rate() {
  if (const auto* c = kindex::runner::calibration()) {
    double copy = 0, gemm = 0;
    if (c->measure_rates(&copy, &gemm) == KINDEX_STATUS_OK && copy > 0)
      return {copy, "this GPU's device-to-device copy, measured (libkindex_gpu_reference measure_rates)"};
  }
  return {kindex::runner::published_measured_rates("NVIDIA H200")->copy_bytes_per_s,
          "H200 device-to-device copy, docs/protocols.md section 4 (this GPU's could not be measured)"};
}

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Near-normal bf16 values (sum of four uniforms, unit variance): never time on zeros.
__global__ void fill_random(uint16_t* data, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const unsigned long long h = mix64(seed * 0x100000001b3ull + i);
    const float s = float(h & 0xffff) + float((h >> 16) & 0xffff) + float((h >> 32) & 0xffff) + float(h >> 48);
    const float x = (s / 65536.0f - 2.0f) * 1.7320508f;
    const uint32_t u = __float_as_uint(x);
    data[i] = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

struct Variant {
  std::string name;
  kindex::decode::ShapeOverrides overrides;
  bool run_only = false;
  kindex_kv_format kv_format = KINDEX_KV_FORMAT_SAME_AS_Q;
};

Variant parse_variant(const std::string& s) {
  Variant v;
  v.name = s;
  for (size_t i = 0; i < s.size();) {
    const char key = s[i++];
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(s.substr(i), &used);
    } catch (...) {
      used = 0;
    }
    if (!used) {
      std::fprintf(stderr, "bad variant '%s' (want letter-number knobs, e.g. s0r1)\n", s.c_str());
      std::exit(2);
    }
    i += used;
    switch (key) {
      case 's': v.overrides.num_segments = value; break;
      case 'r': v.run_only = value != 0; break;
      case 'f':
        if (value < 0 || value > 2) {
          std::fprintf(stderr, "bad variant '%s': f takes 0 (bf16), 1 (e4m3) or 2 (e5m2)\n", s.c_str());
          std::exit(2);
        }
        v.kv_format = value == 1 ? KINDEX_KV_FORMAT_FP8_E4M3 : value == 2 ? KINDEX_KV_FORMAT_FP8_E5M2
                                                                         : KINDEX_KV_FORMAT_SAME_AS_Q;
        break;
      default:
        std::fprintf(stderr, "bad variant '%s': unknown knob '%c'\n", s.c_str(), key);
        std::exit(2);
    }
  }
  return v;
}

__global__ void read_buffer(const uint4* data, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc ^= data[i].x ^ data[i].w;
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads
}

struct Stats {
  double median_us = 0, min_us = 0, p05_us = 0, p95_us = 0, mean_us = 0;
};

Stats summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[size_t(std::lround(q * double(us.size() - 1)))]; };
  Stats s;
  s.median_us = us.size() % 2 ? us[us.size() / 2] : 0.5 * (us[us.size() / 2 - 1] + us[us.size() / 2]);
  s.min_us = us.front();
  s.p05_us = at(0.05);
  s.p95_us = at(0.95);
  double sum = 0;
  for (double x : us) sum += x;
  s.mean_us = sum / double(us.size());
  return s;
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, dump_dir, filter, synthetic, flush_mode = "memset";
  std::vector<Variant> variants;
  int iters = 50, warmup = 10, untimed = 6;
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--json") json_path = next();
    else if (a == "--dump-tables") dump_dir = next();
    else if (a == "--filter") filter = next();
    else if (a == "--iters") iters = std::stoi(next());
    else if (a == "--synthetic") synthetic = next();
    else if (a == "--flush") flush_mode = next();
    else if (a == "--variants") {
      std::string list = next();
      for (size_t p = 0; p <= list.size();) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        if (q > p) variants.push_back(parse_variant(list.substr(p, q - p)));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (variants.empty()) variants.push_back(parse_variant("s0"));

  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  const FloorRate floor_bw = floor_rate();
  const double copy_bytes_per_s = floor_bw.bytes_per_s;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  void* flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  CHECK_CUDA(cudaMemset(flush, 1, flush_bytes));
  unsigned* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&sink, 4));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  nlohmann::json results = nlohmann::json::array();
  std::string timer;
  std::printf("%-24s %5s %6s %8s %9s %9s %7s %6s %9s", "workload", "batch", "pages", "MB", "floor_us", "us", "TB/s",
              "x_floor", "events_us");
  for (size_t v = 1; v < variants.size(); ++v) std::printf(" %10s", variants[v].name.c_str());
  std::printf("\n");

  // The cases: the 68 seed workloads (tables from the catalog's generator) and any synthetic ones.
  struct Case {
    std::string def_name, uuid, label;
    int batch = 0, hq = 32, hkv = 4, d = 128, ps = 1;
    int64_t num_pages = 0, n = 0;
    double sm_scale = 0;
    std::vector<int32_t> indptr, indices, last;  // last empty: no kv_last_page_len
  };
  std::vector<Case> cases;
  for (const char* def_name : {"gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h24_kv4_d128_ps64"}) {
    const auto problem = kindex::catalog::builtin_problem(def_name);
    const auto dp = *kindex::catalog::decode_family_params(problem.definition);
    int index = 0;
    for (const auto& w : problem.workloads) {
      Case c;
      c.def_name = def_name;
      c.uuid = w.uuid;
      c.label = std::string(def_name).substr(17) + "#" + std::to_string(index++);
      if (!filter.empty() && c.label.find(filter) == std::string::npos) continue;
      kindex::catalog::GenerateOptions opt;
      opt.skip_random_floats = true;
      const auto inputs = kindex::catalog::generate_inputs(problem.definition, w, 1, opt);
      auto vec = [](const kindex::Tensor& t) {
        const int32_t* p = t.ptr<int32_t>();
        return std::vector<int32_t>(p, p + t.nbytes() / 4);
      };
      c.indptr = vec(inputs.tensors.at("kv_indptr"));
      c.indices = vec(inputs.tensors.at("kv_indices"));
      if (inputs.tensors.count("kv_last_page_len")) c.last = vec(inputs.tensors.at("kv_last_page_len"));
      c.batch = int(w.axes.at("batch_size"));
      c.num_pages = w.axes.at("num_pages");
      c.n = w.axes.at("num_kv_indices");
      c.hq = int(dp.num_qo_heads);
      c.hkv = int(dp.num_kv_heads);
      c.d = int(dp.head_dim);
      c.ps = int(dp.page_size);
      c.sm_scale = inputs.scalars.at("sm_scale");
      cases.push_back(std::move(c));
    }
  }
  for (size_t p = 0; p < synthetic.size();) {
    size_t q = synthetic.find(',', p);
    if (q == std::string::npos) q = synthetic.size();
    Case c;
    long long b = 0, n = 0, ps = 0;
    int hq = 32, hkv = 4, d = 128;
    const int got = std::sscanf(synthetic.substr(p, q - p).c_str(), "%lld:%lld:%lld:%d:%d:%d", &b, &n, &ps, &hq, &hkv, &d);
    if (got != 3 && got != 6) {
      std::fprintf(stderr, "bad --synthetic entry (want B:N:PS or B:N:PS:HQ:HKV:D)\n");
      return 2;
    }
    p = q + 1;
    const std::string heads = "h" + std::to_string(hq) + "_kv" + std::to_string(hkv) + "_d" + std::to_string(d);
    c.def_name = "synthetic_" + heads;
    c.label = "syn_" + heads + "_b" + std::to_string(b) + "_n" + std::to_string(n) + "_ps" + std::to_string(ps);
    c.batch = int(b);
    c.n = n;
    c.ps = int(ps);
    c.hq = hq;
    c.hkv = hkv;
    c.d = d;
    c.num_pages = n + 64;
    c.sm_scale = 1.0 / std::sqrt(double(d));
    const auto t = kindex::catalog::generate_page_table(b, c.num_pages, n, ps, 7);
    c.indptr = t.kv_indptr;
    c.indices = t.kv_indices;
    if (ps > 1) c.last = t.kv_last_page_len;
    cases.push_back(std::move(c));
  }

  for (const Case& cs : cases) {
    {
      const std::string& label = cs.label;
      const char* def_name = cs.def_name.c_str();
      const bool has_last = !cs.last.empty();
      const int batch = cs.batch;
      const int64_t num_pages = cs.num_pages, n = cs.n;
      const int hq = cs.hq, hkv = cs.hkv, d = cs.d, ps = cs.ps;

      if (!dump_dir.empty()) {  // the same tables for the PyTorch baselines
        std::filesystem::create_directories(dump_dir);
        const std::string base = dump_dir + "/" + label;
        auto dump = [&](const std::string& suffix, const std::vector<int32_t>& t) {
          std::ofstream(base + suffix, std::ios::binary).write(reinterpret_cast<const char*>(t.data()),
                                                               std::streamsize(t.size() * 4));
        };
        dump(".indptr", cs.indptr);
        dump(".indices", cs.indices);
        if (has_last) dump(".last", cs.last);
      }

      // Bytes a call must move: the runner's definition (src/runner/record/floors.hpp, docs/protocols.md "Floors").
      const kindex_paged_decode_params counted = kindex::catalog::decode_params(
          {hq, hkv, d, ps, num_pages}, cs.indptr, cs.indices, has_last ? cs.last.data() : nullptr);
      const kindex::runner::WorkCount work = kindex::runner::paged_decode_work(counted, 2.0);
      const int64_t tokens = std::llround(work.flops / (4.0 * hq * d));  // (sequence, token) pairs read
      const double bytes = work.referenced_bytes;
      const double floor_us = bytes / copy_bytes_per_s * 1e6;

      // Device inputs.
      const size_t cache_elems = size_t(num_pages) * ps * hkv * d;
      void *q, *k, *v, *out, *d_indptr, *d_indices, *d_last = nullptr;
      float* lse;
      CHECK_CUDA(cudaMalloc(&q, size_t(batch) * hq * d * 2));
      CHECK_CUDA(cudaMalloc(&k, cache_elems * 2));
      CHECK_CUDA(cudaMalloc(&v, cache_elems * 2));
      CHECK_CUDA(cudaMalloc(&out, size_t(batch) * hq * d * 2));
      CHECK_CUDA(cudaMalloc(&lse, size_t(batch) * hq * 4));
      CHECK_CUDA(cudaMalloc(&d_indptr, cs.indptr.size() * 4));
      CHECK_CUDA(cudaMalloc(&d_indices, std::max<size_t>(cs.indices.size() * 4, 4)));
      fill_random<<<1024, 256, 0, stream>>>(static_cast<uint16_t*>(q), size_t(batch) * hq * d, 11);
      fill_random<<<4096, 256, 0, stream>>>(static_cast<uint16_t*>(k), cache_elems, 12);
      fill_random<<<4096, 256, 0, stream>>>(static_cast<uint16_t*>(v), cache_elems, 13);
      CHECK_CUDA(cudaGetLastError());
      CHECK_CUDA(cudaMemcpy(d_indptr, cs.indptr.data(), cs.indptr.size() * 4, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(d_indices, cs.indices.data(), cs.indices.size() * 4, cudaMemcpyHostToDevice));
      if (has_last) {
        const auto& last = cs.last;
        CHECK_CUDA(cudaMalloc(&d_last, last.size() * 4));
        CHECK_CUDA(cudaMemcpy(d_last, last.data(), last.size() * 4, cudaMemcpyHostToDevice));
      }
      kindex_paged_decode_params p = counted;  // the same sizes, with device pointers
      p.dtype = KINDEX_DTYPE_BF16;
      p.q = q;
      p.k_cache = k;
      p.v_cache = v;
      p.kv_indptr = static_cast<const int32_t*>(d_indptr);
      p.kv_indices = static_cast<const int32_t*>(d_indices);
      p.kv_last_page_len = static_cast<const int32_t*>(d_last);
      p.sm_scale = float(cs.sm_scale);
      p.output = out;
      p.lse = lse;

      nlohmann::json row = {{"definition", def_name}, {"uuid", cs.uuid}, {"label", label}, {"batch_size", batch},
                            {"num_pages", num_pages}, {"num_kv_indices", n}, {"kv_tokens", tokens},
                            {"bytes", bytes}, {"floor_us", floor_us}};
      nlohmann::json per_variant = nlohmann::json::object();
      Stats event_stats;
      std::vector<double> medians;
      for (const Variant& var : variants) {
        p.kv_format = var.kv_format;
        const kindex::decode::LaunchShape shape = kindex::decode::launch_shape(
            p, var.run_only ? kindex::decode::Entry::plan_and_runs : kindex::decode::Entry::one_call, var.overrides);
        void* ws = nullptr;
        if (shape.workspace_bytes()) CHECK_CUDA(cudaMalloc(&ws, shape.workspace_bytes()));
        try {
          if (var.run_only) kindex::decode::plan(p, ws, shape.workspace_bytes(), stream, var.overrides);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s: %s\n", label.c_str(), e.what());
          std::exit(1);
        }
        auto call = [&] {  // the C++ entry points: the C ABI takes no overrides
          try {
            if (var.run_only)
              kindex::decode::run(p, ws, shape.workspace_bytes(), stream, var.overrides);
            else
              kindex::decode::paged_decode(p, ws, shape.workspace_bytes(), stream, var.overrides);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: %s\n", label.c_str(), e.what());
            std::exit(1);
          }
        };
        kindex::runner::TimingProtocol protocol;
        protocol.cold_l2 = flush_mode == "memset";
        auto prepare = [&] {
          if (flush_mode == "read") {
            read_buffer<<<4 * prop.multiProcessorCount, 512, 0, stream>>>(static_cast<const uint4*>(flush),
                                                                           flush_bytes / 16, sink);
            CHECK_CUDA(cudaGetLastError());
          }
        };
        protocol.untimed = untimed;
        protocol.warmup = warmup;
        protocol.iterations = iters;
        const auto samples = kindex::runner::time_device(protocol, prepare, call, stream, true);
        timer = samples.timer + (samples.note.empty() ? "" : " (" + samples.note + ")");
        std::vector<double> us;
        for (double ns : samples.ns) us.push_back(ns * 1e-3);
        if (&var == &variants[0]) {  // the same calls around CUDA events, for comparison
          std::vector<double> ev;
          for (int it = 0; it < warmup + iters; ++it) {
            CHECK_CUDA(cudaMemsetAsync(flush, 0, flush_bytes, stream));
            CHECK_CUDA(cudaStreamSynchronize(stream));
            CHECK_CUDA(cudaEventRecord(start, stream));
            call();
            CHECK_CUDA(cudaEventRecord(stop, stream));
            CHECK_CUDA(cudaEventSynchronize(stop));
            float ms = 0;
            CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
            if (it >= warmup) ev.push_back(ms * 1e3);
          }
          event_stats = summarize(ev);
        }
        CHECK_CUDA(cudaGetLastError());
        if (ws) CHECK_CUDA(cudaFree(ws));
        const Stats s = summarize(us);
        medians.push_back(s.median_us);
        // The variant's own floor bytes (an fp8 cache: 1-byte K/V elements).
        const bool fp8 = var.kv_format != KINDEX_KV_FORMAT_SAME_AS_Q;
        kindex_paged_decode_params var_counted = counted;
        var_counted.kv_format = var.kv_format;
        const double var_bytes = fp8 ? kindex::runner::paged_decode_work(var_counted, 2.0).referenced_bytes : bytes;
        per_variant[var.name] = {{"median_us", s.median_us}, {"min_us", s.min_us}, {"p05_us", s.p05_us},
                                 {"p95_us", s.p95_us}, {"mean_us", s.mean_us},
                                 {"kv_format", fp8 ? (var.kv_format == KINDEX_KV_FORMAT_FP8_E4M3 ? "e4m3" : "e5m2")
                                                   : "bf16"},
                                 {"achieved_tb_per_s", var_bytes / (s.median_us * 1e-6) / 1e12},
                                 {"ratio_to_floor", s.median_us / (var_bytes / copy_bytes_per_s * 1e6)},
                                 {"num_segments", shape.num_segments}, {"piece_tokens", shape.piece_tokens},
                                 {"stages", shape.stages}, {"workspace_bytes", shape.workspace_bytes()},
                                 {"run_only", var.run_only}, {"plain_copies", shape.plain_copies}};
      }
      row["kindex"] = per_variant[variants[0].name];
      row["kindex_cuda_events"] = {{"median_us", event_stats.median_us}, {"min_us", event_stats.min_us},
                                   {"p95_us", event_stats.p95_us}};
      row["variants"] = per_variant;
      results.push_back(row);
      std::printf("%-24s %5d %6lld %8.2f %9.2f %9.2f %7.3f %6.2f %9.2f", label.c_str(), batch, (long long)n,
                  bytes / 1e6, floor_us, medians[0], bytes / (medians[0] * 1e-6) / 1e12, medians[0] / floor_us,
                  event_stats.median_us);
      for (size_t i = 1; i < medians.size(); ++i) std::printf(" %10.2f", medians[i]);
      std::printf("\n");
      std::fflush(stdout);

      for (void* ptr : {q, k, v, out, (void*)lse, d_indptr, d_indices, d_last})
        if (ptr) CHECK_CUDA(cudaFree(ptr));
    }
  }

  if (!json_path.empty()) {
    nlohmann::json doc = {
        {"benchmark", "bench_decode"},
        {"command", command},
        {"date_utc", now_utc()},
        {"device", {{"name", prop.name}, {"sm_count", prop.multiProcessorCount}, {"l2_bytes", prop.l2CacheSize},
                    {"driver_version", driver}, {"runtime_version", runtime}}},
        {"protocol", {{"cold_l2", flush_mode == "memset"}, {"flush", flush_mode}, {"flush_bytes", flush_bytes},
                      {"untimed", untimed}, {"warmup", warmup},
                      {"iterations", iters}, {"statistic", "median"}, {"timer", timer},
                      {"also", "kindex_cuda_events: CUDA events around each call (first variant)"}}},
        {"floor", {{"bytes", "K/V of distinct referenced tokens + q + output + lse + kv_indptr + kv_indices + "
                             "kv_last_page_len (runner::paged_decode_work)"},
                   {"bandwidth_bytes_per_s", copy_bytes_per_s},
                   {"bandwidth_source", floor_bw.source}}},
        {"variants", [&] {
           nlohmann::json a = nlohmann::json::array();
           for (const auto& v : variants) a.push_back(v.name);
           return a;
         }()},
        {"workloads", results}};
    std::ofstream(json_path) << doc.dump(1) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
