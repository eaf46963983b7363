# The CLI starts on a machine with no GPU driver and no CUDA libraries (an index host): it may not need any of them
# at load time. GPU work reaches kernels through libraries the runner dlopens (src/runner/execute/libraries.hpp).
# Usage: cmake -DEXE=path/kindex -DREADELF=readelf -P check_no_gpu_libraries.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${READELF} -d ${EXE} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${EXE} failed (${rc})")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" needed "${out}")
set(gpu)
foreach(line IN LISTS needed)
  if(line MATCHES "\\[(lib(cuda|cudart|cublas|cublasLt|cupti|nvidia-ml|nvrtc)[.][^]]*)\\]")
    list(APPEND gpu ${CMAKE_MATCH_1})
  endif()
endforeach()
if(gpu)
  message(FATAL_ERROR "${EXE} needs GPU libraries at load time: ${gpu}")
endif()
list(LENGTH needed n)
message(STATUS "${EXE}: ${n} needed libraries, none of them a GPU library")
# And it starts: the index commands' help, with the dynamic loader's search path cleared.
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH= ${EXE} serve --help
                OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT help MATCHES "serve")
  message(FATAL_ERROR "${EXE} serve --help failed (${rc}): ${help}")
endif()
