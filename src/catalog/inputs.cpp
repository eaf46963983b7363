#include "catalog/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "catalog/loader.hpp"
#include "catalog/page_table.hpp"
#include "catalog/safetensors.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"

namespace kindex::catalog {

uint64_t default_seed(const Definition& def) {
  return def.source == Source::sol_execbench ? kSolDefaultSeed : kFibDefaultSeed;
}

uint64_t page_table_seed(const Workload& workload) {
  std::string key = workload.definition + "/" + workload.uuid;
  for (const auto& [name, value] : workload.axes) key += "/" + name + "=" + std::to_string(value);
  return mix64(stream_id(key.c_str()));
}

namespace {

bool is_page_table_input(const std::string& name) {
  return name == "kv_indptr" || name == "kv_indices" || name == "kv_last_page_len";
}

// A decode KV cache [num_pages, page_size, ...] whose page table the catalog generates.
bool is_paged_cache(const std::string& name, const std::vector<int64_t>& shape,
                    const std::map<std::string, int64_t>& axes) {
  return (name == "k_cache" || name == "v_cache") && axes.count("num_pages") && axes.count("num_kv_indices") &&
         !shape.empty() && shape[0] == axes.at("num_pages");
}

// The pages some sequence references get the random values FlashInfer-Bench's rule gives them (element i of the
// cache always gets the same value); pages no sequence references are zeros. No kernel may read them, and
// drawing them cost most of the generation time (the ps64 workloads allocate ~3x the pages they use).
void fill_referenced_pages(Tensor& t, const std::string& name, uint64_t seed, const PageTable& pt) {
  const int64_t pages = t.shape()[0], page_elems = pages ? t.numel() / pages : 0;
  std::vector<char> used(size_t(pages), 0);
  for (int32_t id : pt.kv_indices)
    if (id >= 0 && id < pages) used[size_t(id)] = 1;
  const uint64_t stream = stream_id(name.c_str());
  // The tensor starts zeroed; each used page gets its values.
  parallel_for(pages, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p)
      if (used[size_t(p)]) fill_normal_range(t, seed, stream, p * page_elems, (p + 1) * page_elems);
  }, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, page_elems)));
}

// SOL-ExecBench's rules for L2/003's named inputs (see inputs.hpp), applied to any SOL definition by name.
void fill_sol_tensor(Tensor& t, const std::string& name, uint64_t seed, Inputs& inputs) {
  if (name.size() > 7 && name.ends_with("_weight") && t.shape().size() == 2 && t.shape()[1] > 0) {
    fill_normal(t, seed, stream_id(name.c_str()), 1.0 / std::sqrt(double(t.shape()[1])));
    return;
  }
  if (name == "cos" || name == "sin") {
    // One tensor of angles drives both, so cos^2 + sin^2 = 1 elementwise (up to bf16 rounding).
    const bool is_cos = name == "cos";
    TensorView v = t.view();
    const uint64_t stream = stream_id("rope_angle");
    parallel_for(
        t.numel(),
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            float angle = std::clamp(float(standard_normal(seed, stream, uint64_t(i))), -std::numbers::pi_v<float>,
                                     std::numbers::pi_v<float>);
            v.set(i, is_cos ? std::cos(angle) : std::sin(angle));
          }
        },
        1 << 14);
    return;
  }
  if (name == "attn_weights" && !t.shape().empty() && t.shape().back() > 0) {
    // softmax over the last axis of fp32 standard normal rows, then cast to the tensor's dtype.
    const int64_t cols = t.shape().back(), rows = t.numel() / cols;
    TensorView v = t.view();
    const uint64_t stream = stream_id(name.c_str());
    parallel_for(
        rows,
        [&](int64_t b, int64_t e) {
          std::vector<float> x(static_cast<size_t>(cols));
          for (int64_t r = b; r < e; ++r) {
            normal_values(seed, stream, r * cols, (r + 1) * cols, x.data());
            float m = -INFINITY;
            for (float xi : x) m = std::max(m, xi);
            float sum = 0.f;
            for (float& xi : x) sum += (xi = std::exp(xi - m));
            for (int64_t c = 0; c < cols; ++c) v.set(r * cols + c, x[size_t(c)] / sum);
          }
        },
        std::max<int64_t>(1, (1 << 14) / cols));
    return;
  }
  (void)inputs;
  fill_normal(t, seed, stream_id(name.c_str()));
}

}  // namespace

Inputs generate_inputs(const Definition& def, const Workload& workload, uint64_t seed, const GenerateOptions& options) {
  const std::string where = "workload " + workload.definition + "/" + workload.uuid;
  const auto axes = resolve_axes(def, workload.axes, where);
  Inputs in;
  std::map<std::string, SafetensorsFile> files;  // each file read once
  std::vector<const TensorSpec*> page_table_inputs;
  std::vector<std::string> paged_caches;

  for (const TensorSpec& spec : def.inputs) {
    auto it = workload.inputs.find(spec.name);
    const InputSpec given = it == workload.inputs.end() ? InputSpec{} : it->second;
    const std::string field = "inputs." + spec.name;
    if (spec.is_scalar()) {
      if (given.kind != InputSpec::Kind::scalar) throw Error(where, field, "", "scalar input has no value");
      in.scalars[spec.name] = given.value;
      continue;
    }
    if (given.kind == InputSpec::Kind::scalar) throw Error(where, field, "", "a tensor input cannot be a scalar");
    const auto shape = concrete_shape(spec, axes);
    if (given.kind == InputSpec::Kind::safetensors) {
      std::filesystem::path path(given.path);
      if (path.is_relative()) path = std::filesystem::path(workload.base_dir) / path;
      path = path.lexically_normal();
      auto f = files.find(path.string());
      if (f == files.end()) {
        try {
          f = files.emplace(path.string(), read_safetensors(path)).first;
        } catch (const Error& e) {
          if (!e.field().empty()) throw;
          throw Error(e.where(), "inputs." + spec.name + " of workload " + workload.uuid, given.path, e.problem());
        }
      }
      auto t = f->second.tensors.find(given.tensor_key);
      if (t == f->second.tensors.end())
        throw Error(path.string(), "tensor_key", given.tensor_key,
                    "no such tensor in the file (input " + spec.name + ")");
      if (t->second.dtype() != spec.dtype)
        throw Error(path.string(), given.tensor_key + ".dtype", std::string(dtype_name(t->second.dtype())),
                    "input " + spec.name + " is declared " + std::string(dtype_name(spec.dtype)));
      if (t->second.shape() != shape)
        throw Error(path.string(), given.tensor_key + ".shape", shape_string(t->second.shape()),
                    "input " + spec.name + " has shape " + shape_string(shape) + " for this workload's axes");
      in.tensors[spec.name] = t->second;
      continue;
    }
    if (!is_floating(spec.dtype)) {
      bool decode_axes = axes.count("batch_size") && axes.count("num_pages") && axes.count("num_kv_indices");
      if (!is_page_table_input(spec.name) || !decode_axes)
        throw Error(where, field, std::string(dtype_name(spec.dtype)),
                    "no generator for a random integer input; give it as safetensors");
      page_table_inputs.push_back(&spec);
      continue;
    }
    if (options.skip_random_floats) continue;
    Tensor t(spec.dtype, shape);
    if (is_paged_cache(spec.name, shape, axes)) {
      paged_caches.push_back(spec.name);  // filled once the page table is known
    } else if (def.source == Source::sol_execbench)
      fill_sol_tensor(t, spec.name, seed, in);
    else
      fill_normal(t, seed, stream_id(spec.name.c_str()));
    in.tensors[spec.name] = std::move(t);
  }

  if (!page_table_inputs.empty()) {
    const int64_t page_size = axes.count("page_size") ? axes.at("page_size") : 1;
    PageTable pt = generate_page_table(axes.at("batch_size"), axes.at("num_pages"), axes.at("num_kv_indices"),
                                       page_size, page_table_seed(workload));
    for (const TensorSpec* spec : page_table_inputs) {
      const std::vector<int32_t>& values = spec->name == "kv_indptr"    ? pt.kv_indptr
                                           : spec->name == "kv_indices" ? pt.kv_indices
                                                                        : pt.kv_last_page_len;
      const auto shape = concrete_shape(*spec, axes);
      if (shape != std::vector<int64_t>{int64_t(values.size())})
        throw Error(where, "inputs." + spec->name + ".shape", shape_string(shape),
                    "the page table for these axes has " + std::to_string(values.size()) + " entries");
      Tensor t(spec->dtype, shape);
      TensorView v = t.view();
      for (size_t i = 0; i < values.size(); ++i) v.set(int64_t(i), values[i]);
      in.tensors[spec->name] = std::move(t);
    }
    for (const std::string& name : paged_caches) fill_referenced_pages(in.tensors[name], name, seed, pt);
  } else {
    for (const std::string& name : paged_caches) fill_normal(in.tensors[name], seed, stream_id(name.c_str()));
  }
  return in;
}

}  // namespace kindex::catalog
