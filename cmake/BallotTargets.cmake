# Helpers that give every Ballot target the same language level, warnings and sanitizer flags,
# without touching global variables such as CMAKE_CXX_FLAGS.

if(NOT BALLOT_SANITIZE MATCHES "^(OFF|address|thread)$")
  message(FATAL_ERROR "BALLOT_SANITIZE must be OFF, address or thread (got '${BALLOT_SANITIZE}')")
endif()

add_library(ballot_build_flags INTERFACE)
target_compile_features(ballot_build_flags INTERFACE cxx_std_20)
# -ffp-contract=off: no multiply and add is fused into one rounding. The float arithmetic replicas
# must reproduce bit for bit (kernels/update_logic.h, inline in headers that every module and the
# Python module include) then gives what the CUDA kernels give on any CPU and with any -march: GCC
# contracts a*b + c by default wherever the target has FMA (x86-64-v3, aarch64).
target_compile_options(ballot_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers -ffp-contract=off>)
if(BALLOT_SANITIZE STREQUAL "address")
  set(BALLOT_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                             -fno-omit-frame-pointer)
elseif(BALLOT_SANITIZE STREQUAL "thread")
  set(BALLOT_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
endif()
if(BALLOT_SANITIZER_FLAGS)
  target_compile_options(ballot_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${BALLOT_SANITIZER_FLAGS}>)
  target_link_options(ballot_build_flags INTERFACE ${BALLOT_SANITIZER_FLAGS})
endif()

# ballot_add_library(<module> [INTERFACE] [sources...]): target ballot_<module>, alias and export
# name ballot::<module>, headers rooted at the repository (#include "<module>/x.h"). A module with
# no sources yet is an INTERFACE library.
function(ballot_add_library module)
  set(scope PUBLIC)
  if(ARGV1 STREQUAL "INTERFACE")
    set(scope INTERFACE)
  endif()
  add_library(ballot_${module} ${ARGN})
  add_library(ballot::${module} ALIAS ballot_${module})
  set_target_properties(ballot_${module} PROPERTIES EXPORT_NAME ${module})
  target_include_directories(ballot_${module} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
    $<INSTALL_INTERFACE:include/ballot>)
  target_compile_features(ballot_${module} ${scope} cxx_std_20)
  if(scope STREQUAL "PUBLIC")
    set_target_properties(ballot_${module} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_link_libraries(ballot_${module} PRIVATE $<BUILD_INTERFACE:ballot_build_flags>)
  endif()
  set_property(GLOBAL APPEND PROPERTY BALLOT_EXPORTED_TARGETS ballot_${module})
endfunction()

# ballot_add_executable(<name> sources...): a program built with the project's flags.
function(ballot_add_executable name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE ballot_build_flags)
endfunction()
