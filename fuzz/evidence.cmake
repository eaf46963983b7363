# Evidence readers under libFuzzer: the strict YAML/JSON manifest readers with validation and digesting, the export
# line parser, and the signed attestation reader with its signature check. The evidence sources are compiled into
# each target (not linked from kindex_evidence) so that they carry the fuzzer's coverage instrumentation and the
# sanitizers.
file(GLOB _kx_evidence_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/evidence/*.cpp)
foreach(_target fuzz_evidence_manifest fuzz_evidence_export_line fuzz_evidence_attestation)
  kindex_fuzz_target(${_target} ${CMAKE_CURRENT_SOURCE_DIR}/${_target}.cpp
    DEPS kindex_core OpenSSL::Crypto kindex_yaml kindex_zstd)
  target_sources(${_target} PRIVATE ${_kx_evidence_sources} ${PROJECT_BINARY_DIR}/src/evidence_schemas.cpp)
  target_include_directories(${_target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  add_dependencies(${_target} kindex_evidence)  # generates evidence_schemas.cpp
endforeach()
