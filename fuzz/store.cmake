# The store's importer under libFuzzer: any bytes as an import file (format detection from content, the export
# importer with its digest and fact checks, trace lines with their timestamps and the problem -> manifest
# converter, kindex run records) into an in-memory store. The store, evidence and problem_manifest sources are
# compiled with instrumentation here (the catalog is catalog.cmake's instrumented one).
file(GLOB _kx_store_fuzz_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/store/*.cpp ${PROJECT_SOURCE_DIR}/src/evidence/*.cpp
     ${PROJECT_SOURCE_DIR}/src/problem_manifest/*.cpp)
kindex_fuzz_target(fuzz_store_import ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_store_import.cpp
  DEPS kindex_core kindex_catalog_fuzz OpenSSL::Crypto kindex_yaml kindex_zstd kindex_sqlite)
target_sources(fuzz_store_import PRIVATE ${_kx_store_fuzz_sources} ${PROJECT_BINARY_DIR}/src/evidence_schemas.cpp)
target_include_directories(fuzz_store_import PRIVATE ${PROJECT_SOURCE_DIR}/src)
add_dependencies(fuzz_store_import kindex_evidence)  # generates evidence_schemas.cpp
