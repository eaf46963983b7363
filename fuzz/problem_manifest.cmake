# The problem -> manifest converter under libFuzzer (definitions and trace workload blocks as the importer gets
# them). Its sources are compiled here with instrumentation; the catalog is the instrumented one of catalog.cmake.
file(GLOB _kx_problem_manifest_fuzz_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/problem_manifest/*.cpp)
kindex_fuzz_target(fuzz_problem_manifest ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_problem_manifest.cpp
  DEPS kindex_catalog_fuzz kindex_evidence)
target_sources(fuzz_problem_manifest PRIVATE ${_kx_problem_manifest_fuzz_sources})
