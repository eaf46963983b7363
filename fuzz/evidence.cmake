# Evidence readers under libFuzzer: the strict YAML/JSON manifest readers with validation and digesting, and the
# export line parser.
kindex_fuzz_target(fuzz_evidence_manifest ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_evidence_manifest.cpp DEPS kindex_evidence)
kindex_fuzz_target(fuzz_evidence_export_line ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_evidence_export_line.cpp DEPS kindex_evidence)
