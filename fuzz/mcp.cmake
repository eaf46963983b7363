# The MCP server's request path under libFuzzer: any bytes as one JSON-RPC message (`kindex mcp`'s stdin line)
# through the real parser, dispatch, argument validation and tools over an in-memory store holding the KernelIndex
# export slices (kernel and serving). The mcp sources are compiled into the target for coverage and sanitizers.
file(GLOB _kx_mcp_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/mcp/*.cpp)
kindex_fuzz_target(fuzz_mcp_request ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_mcp_request.cpp DEPS kindex_store)
target_sources(fuzz_mcp_request PRIVATE ${_kx_mcp_sources})
target_include_directories(fuzz_mcp_request PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(fuzz_mcp_request PRIVATE KINDEX_MCP_VERSION="${PROJECT_VERSION}" ${KINDEX_FUZZ_SLICE_DEFINITIONS})
