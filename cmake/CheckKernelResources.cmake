# ctest script: compiles a CUDA source with `ptxas -v` for each architecture and fails if any kernel
# has a stack frame or spills registers (local memory is ~100x slower than a register and is what
# kept the majority vote at a fraction of the memory bandwidth). Needs nvcc, no GPU.
# Variables: NVCC, SOURCE, ARCHS (semicolon list, e.g. "75;80;90"), INCLUDES (semicolon list).
foreach(var NVCC SOURCE ARCHS INCLUDES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CheckKernelResources: ${var} is not set")
  endif()
endforeach()

set(include_flags)
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags "-I${dir}")
endforeach()

set(failures "")
set(kernels 0)
foreach(arch IN LISTS ARCHS)
  execute_process(
    COMMAND "${NVCC}" -std=c++20 ${include_flags} -arch=sm_${arch} -Xptxas -v -c "${SOURCE}" -o /dev/null
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "nvcc failed for sm_${arch}:\n${out}${err}")
  endif()
  string(REPLACE "\n" ";" lines "${out}${err}")
  set(function "")
  foreach(line IN LISTS lines)
    if(line MATCHES "Function properties for ([A-Za-z0-9_]+)")
      set(function "${CMAKE_MATCH_1}")
    elseif(line MATCHES "([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
      math(EXPR kernels "${kernels} + 1")
      if(NOT CMAKE_MATCH_1 EQUAL 0 OR NOT CMAKE_MATCH_2 EQUAL 0 OR NOT CMAKE_MATCH_3 EQUAL 0)
        string(APPEND failures "  sm_${arch} ${function}: ${CMAKE_MATCH_0}\n")
      endif()
    endif()
  endforeach()
endforeach()

if(kernels EQUAL 0)
  message(FATAL_ERROR "CheckKernelResources: ptxas reported no kernel for ${SOURCE}")
endif()
if(failures)
  message(FATAL_ERROR "kernels with a stack frame or register spills:\n${failures}")
endif()
message(STATUS "${kernels} kernel compilations (${ARCHS}): no stack frame, no spills")
