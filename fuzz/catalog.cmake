# libFuzzer targets for the catalog's parsers: definitions, workload lines and safetensors files. The catalog is
# rebuilt here with coverage and sanitizer instrumentation (kindex_catalog_fuzz) so the fuzzer sees inside it.
get_target_property(_catalog_sources kindex_catalog SOURCES)
set(_catalog_fuzz_sources "")
foreach(_s ${_catalog_sources})
  if(IS_ABSOLUTE "${_s}")
    list(APPEND _catalog_fuzz_sources "${_s}")
  else()
    list(APPEND _catalog_fuzz_sources "${PROJECT_SOURCE_DIR}/src/${_s}")
  endif()
endforeach()
add_library(kindex_catalog_fuzz STATIC ${_catalog_fuzz_sources})
add_dependencies(kindex_catalog_fuzz kindex_catalog)  # generates the embedded definitions source first
target_include_directories(kindex_catalog_fuzz PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(kindex_catalog_fuzz PUBLIC kindex_core)
target_compile_options(kindex_catalog_fuzz PRIVATE -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)

kindex_fuzz_target(fuzz_catalog_definition ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_catalog_definition.cpp DEPS kindex_catalog_fuzz)
kindex_fuzz_target(fuzz_catalog_workload ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_catalog_workload.cpp DEPS kindex_catalog_fuzz)
kindex_fuzz_target(fuzz_catalog_safetensors ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_catalog_safetensors.cpp DEPS kindex_catalog_fuzz)
