# The HTTP request path under libFuzzer: raw bytes (request line, URL, query, headers, body; pipelined requests)
# through `kindex serve`'s real router and pages over an in-memory store holding the KernelIndex export slices (kernel and serving).
# The web sources are compiled into the target so that they carry the coverage instrumentation and sanitizers.
file(GLOB _kx_web_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/web/*.cpp)
kindex_fuzz_target(fuzz_web_request ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_web_request.cpp DEPS kindex_store PkgConfig::HTTPLIB)
target_sources(fuzz_web_request PRIVATE ${_kx_web_sources})
target_include_directories(fuzz_web_request PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(fuzz_web_request PRIVATE ${KINDEX_FUZZ_SLICE_DEFINITIONS})
