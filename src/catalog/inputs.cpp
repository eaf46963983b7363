#include "catalog/inputs.hpp"

#include <algorithm>
#include <cmath>

#include "catalog/loader.hpp"
#include "catalog/page_table.hpp"
#include "catalog/safetensors.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/random_math.hpp"

namespace kindex::catalog {

uint64_t default_seed(const Definition& def) {
  return def.source == Source::sol_execbench ? kSolDefaultSeed : kFibDefaultSeed;
}

uint64_t page_table_seed(const Workload& workload) {
  std::string key = workload.definition + "/" + workload.uuid;
  for (const auto& [name, value] : workload.axes) key += "/" + name + "=" + std::to_string(value);
  return mix64(stream_id(key.c_str()));
}

LengthDistribution page_table_lengths(const Workload& workload) {
  auto it = workload.inputs.find("kv_indptr");
  if (it == workload.inputs.end() || it->second.lengths.empty()) return LengthDistribution::exponential;
  auto d = parse_length_distribution(it->second.lengths);
  if (!d)  // the loader refuses these; a Workload built by hand may still hold one
    throw Error("workload " + workload.definition + "/" + workload.uuid, "inputs.kv_indptr.lengths",
                it->second.lengths,
                "unknown page-table length distribution (" + std::string(length_distribution_names()) + ")");
  return *d;
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

// SOL-ExecBench's rules for L2/003's named inputs (see inputs.hpp), applied to any SOL definition by name.
RandomFill sol_fill(const std::string& name, const std::vector<int64_t>& shape) {
  RandomFill f;
  f.stream = stream_id(name.c_str());
  if (name.size() > 7 && name.ends_with("_weight") && shape.size() == 2 && shape[1] > 0) {
    f.scale = 1.0 / std::sqrt(double(shape[1]));
  } else if (name == "cos" || name == "sin") {
    // One tensor of angles drives both, so cos^2 + sin^2 = 1 elementwise (up to bf16 rounding).
    f.kind = name == "cos" ? RandomFill::Kind::cos_of_angle : RandomFill::Kind::sin_of_angle;
    f.stream = stream_id("rope_angle");
  } else if (name == "attn_weights" && !shape.empty() && shape.back() > 0) {
    f.kind = RandomFill::Kind::softmax_rows;  // softmax over the last axis of fp32 normal rows
    f.row = shape.back();
  }
  return f;
}

// The pages some sequence references get the random values FlashInfer-Bench's rule gives them (element i of the
// cache always gets the same value); pages no sequence references are zeros. No kernel may read them, and
// drawing them cost most of the generation time (the ps64 workloads allocate ~3x the pages they use).
void mark_referenced_pages(RandomFill& f, const PageTable& pt) {
  const int64_t pages = f.shape.empty() ? 0 : f.shape[0];
  int64_t numel = 1;
  for (int64_t d : f.shape) numel *= d;
  f.page_elems = pages ? numel / pages : 0;
  f.pages_used.assign(size_t(pages), 0);
  for (int32_t id : pt.kv_indices)
    if (id >= 0 && id < pages) f.pages_used[size_t(id)] = 1;
}

}  // namespace

void fill_random(Tensor& t, const RandomFill& f, uint64_t seed) {
  namespace rm = random_math;
  TensorView v = t.view();
  switch (f.kind) {
    case RandomFill::Kind::normal:
      if (f.pages_used.empty()) {
        fill_normal(t, seed, f.stream, f.scale);
        return;
      }
      // The tensor starts zeroed; each used page gets its values.
      parallel_for(int64_t(f.pages_used.size()), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p)
          if (f.pages_used[size_t(p)])
            fill_normal_range(t, seed, f.stream, p * f.page_elems, (p + 1) * f.page_elems, f.scale);
      }, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, f.page_elems)));
      return;
    case RandomFill::Kind::cos_of_angle:
    case RandomFill::Kind::sin_of_angle: {
      const bool cosine = f.kind == RandomFill::Kind::cos_of_angle;
      parallel_for(
          t.numel(),
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i)
              v.set(i, rm::trig_of_angle(rm::clamped_angle(standard_normal(seed, f.stream, uint64_t(i))), cosine));
          },
          1 << 14);
      return;
    }
    case RandomFill::Kind::softmax_rows: {
      // In fp32 as the source does: max, then a sequential sum of the exponentials, then each over the sum.
      const int64_t cols = f.row, rows = t.numel() / cols;
      parallel_for(
          rows,
          [&](int64_t b, int64_t e) {
            std::vector<float> x(static_cast<size_t>(cols));
            for (int64_t r = b; r < e; ++r) {
              normal_values(seed, f.stream, r * cols, (r + 1) * cols, x.data());
              float m = -INFINITY;
              for (float xi : x) m = std::max(m, xi);
              float sum = 0.f;
              for (float& xi : x) sum += (xi = float(rm::exp_nonpositive(double(xi - m))));
              for (int64_t c = 0; c < cols; ++c) v.set(r * cols + c, x[size_t(c)] / sum);
            }
          },
          std::max<int64_t>(1, (1 << 14) / cols));
      return;
    }
  }
}

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
    RandomFill fill = def.source == Source::sol_execbench ? sol_fill(spec.name, shape) : RandomFill{};
    if (def.source != Source::sol_execbench) fill.stream = stream_id(spec.name.c_str());
    fill.dtype = spec.dtype;
    fill.shape = shape;
    if (is_paged_cache(spec.name, shape, axes)) paged_caches.push_back(spec.name);  // its pages once the table is known
    in.random[spec.name] = std::move(fill);
  }

  if (!page_table_inputs.empty()) {
    const int64_t page_size = axes.count("page_size") ? axes.at("page_size") : 1;
    PageTableOptions table_options;
    table_options.lengths = page_table_lengths(workload);
    // A decode variant's request with several query tokens holds them all (decode_variants README).
    if (axes.count("q_len_per_req")) table_options.min_tokens = axes.at("q_len_per_req");
    PageTable pt = generate_page_table(axes.at("batch_size"), axes.at("num_pages"), axes.at("num_kv_indices"),
                                       page_size, page_table_seed(workload), table_options);
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
    for (const std::string& name : paged_caches) mark_referenced_pages(in.random[name], pt);
  }
  if (options.plan_random_floats) return in;
  for (auto& [name, fill] : in.random) {
    Tensor t(fill.dtype, fill.shape);
    fill_random(t, fill, seed);
    in.tensors[name] = std::move(t);
  }
  in.random.clear();
  return in;
}

}  // namespace kindex::catalog
