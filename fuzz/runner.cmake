# The runner's solution-file loaders (FlashInfer-Bench and SOL-ExecBench schemas) under libFuzzer; their one
# source is compiled here with instrumentation.
kindex_fuzz_target(fuzz_runner_solution ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_runner_solution.cpp DEPS kindex_core)
target_sources(fuzz_runner_solution PRIVATE ${PROJECT_SOURCE_DIR}/src/runner/execute/solution_file.cpp)
target_include_directories(fuzz_runner_solution PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
# --gpus, the argument that picks the GPUs a bench is spread over.
kindex_fuzz_target(fuzz_runner_gpus ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_runner_gpus.cpp DEPS kindex_core)
target_sources(fuzz_runner_gpus PRIVATE ${PROJECT_SOURCE_DIR}/src/runner/gpus.cpp)
target_include_directories(fuzz_runner_gpus PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
