#pragma once
// The one converter from a problem (a FlashInfer-Bench / SOL-ExecBench definition and one of its workloads) to
// KernelIndex's OperationSpec and WorkloadCase manifests, in the form KernelIndex publishes them. kindex's own runs
// (bench) and imported harness traces (store) both call it, so the same definition and workload always get the
// same digests and their runs can share a cohort (docs/evidence.md, "One converter for problems").
//
// Above catalog (definitions, workloads, the axis-expression evaluator) and evidence (manifests, digests).
#include <string>

#include <nlohmann/json.hpp>

#include "catalog/definition.hpp"
#include "evidence/manifest.hpp"

namespace kindex::problem_manifest {

// A lowercase slug for metadata names ("GQA decode h32" -> "gqa-decode-h32"; "unnamed" when nothing is left).
std::string slug(const std::string& text);

// KernelIndex's short dtype name for an upstream (PyTorch) one: "bfloat16" -> "bf16", "float32" -> "fp32";
// an unknown name is kept as written.
std::string short_dtype(const std::string& upstream_name);

// A definition in its upstream document form (name, description, op_type, axes, inputs, outputs in file order),
// written back from the catalog's model: what operation_spec reads.
nlohmann::ordered_json definition_document(const catalog::Definition& def);

// The workload block a trace line carries: {uuid, axes, inputs{name: {type, ...}}, tolerance?}.
nlohmann::json workload_document(const catalog::Workload& w);

// An upstream definition document as a KernelIndex OperationSpec manifest document (not yet validated): axes
// by role, tensors in the definition's order, family from op_type (or the name), dtypes in KernelIndex's short
// names. Throws kindex::Error(where, field, value) for a definition it cannot read.
nlohmann::json operation_document(const nlohmann::ordered_json& definition, const std::string& where);
// The same, validated and digested.
evidence::Manifest operation_spec(const catalog::Definition& def);

// One workload (the trace-line block above) of an operation (an OperationSpec document) as a WorkloadCase:
// variable axes from the workload, constant ones from the operation, derived ones evaluated with the catalog's
// expression evaluator; tensor shapes resolved; scalars with their values; the correctness block from the
// workload's tolerance. `definition_name` titles it. Throws kindex::Error naming `where` and the field.
evidence::Manifest workload_case(const nlohmann::json& operation, const nlohmann::json& workload,
                                 const std::string& definition_name, const std::string& where);
evidence::Manifest workload_case(const catalog::Definition& def, const catalog::Workload& w,
                                 const evidence::Manifest& operation);

}  // namespace kindex::problem_manifest
