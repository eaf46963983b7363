#pragma once
// The problem catalog's data model: a definition (axes, inputs, outputs, constraints, reference code) and
// its workloads (concrete axis values, how each input is produced, tolerances), in the shape shared by
// FlashInfer-Bench and SOL-ExecBench definition / workload files.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.hpp"

namespace kindex::catalog {

// Where a definition's semantics come from; picks the comparator, trial count and timing defaults.
enum class Source { flashinfer_bench, sol_execbench };
std::string_view source_name(Source s);  // "flashinfer-bench", "sol-execbench"
// The correctness rounds the source's harness runs on each workload: FlashInfer-Bench 3, SOL-ExecBench 10.
int correctness_rounds(Source s);

struct Axis {
  enum class Kind { constant, variable, expression } kind = Kind::variable;
  int64_t value = 0;       // constant
  std::string expression;  // expression, over other axes ("num_attention_heads * head_dim")
  std::string description;
};

struct TensorSpec {
  std::string name;
  std::optional<std::vector<std::string>> shape;  // axis names; nullopt for a scalar
  DType dtype = DType::f32;
  std::string description;
  bool is_scalar() const { return !shape.has_value(); }
};

struct Definition {
  std::string name;
  std::string description;
  std::string op_type;
  Source source = Source::flashinfer_bench;
  std::vector<std::string> tags;
  std::vector<std::pair<std::string, Axis>> axes;  // in file order
  std::vector<std::string> constraints;            // Python-like boolean expressions over axes and inputs
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::string reference;  // upstream reference code (Python), kept verbatim
  nlohmann::json raw;     // the file as read
  std::string file;       // the file it was loaded from (load_definition); empty for text and bundled definitions

  const Axis* axis(const std::string& name) const;
  const TensorSpec* input(const std::string& name) const;
  const TensorSpec* output(const std::string& name) const;
};

struct InputSpec {
  enum class Kind { random, scalar, safetensors } kind = Kind::random;
  double value = 0;        // scalar
  std::string path;        // safetensors, relative to Workload::base_dir unless absolute
  std::string tensor_key;  // safetensors
  // random kv_indptr only (kindex's extension, `"lengths": "equal"`): the page-table generator's length
  // distribution (catalog/page_table.hpp) as written; empty: not given (the default, exponential).
  std::string lengths;
};

struct Tolerance {
  double max_atol = 1e-2;
  double max_rtol = 1e-2;
  std::optional<double> required_match_ratio;  // as stated in the file; the SOL harness uses 0.99 regardless
};

struct Workload {
  std::string definition;  // name of the definition it belongs to
  std::string uuid;
  std::map<std::string, int64_t> axes;  // the variable axes' values
  std::map<std::string, InputSpec> inputs;
  std::optional<Tolerance> tolerance;
  std::string base_dir;  // directory that relative safetensors paths resolve against
  std::string source;    // where it was read from, "<file>:<line>", for error messages
  nlohmann::json raw;
};

// Whether two definitions describe the same computation's signature: the same axes (name, kind, value,
// expression; order and descriptions aside), constraints, and inputs and outputs (names, order, shapes,
// dtypes). On a difference, `difference` (if given) says what differs.
bool same_signature(const Definition& a, const Definition& b, std::string* difference = nullptr);

}  // namespace kindex::catalog
