# ---- HIP kernels (kernels/hip/): a clang offload bundle for AMD GPUs, when clang can build one --
# The kernel source of kernels/device_kernels.h, compiled by clang (Debian's clang-19 with lld-19
# and clang-tools-19; scripts/install-deps.sh installs them) for each AMD target that this clang
# knows, device code only and without any ROCm header or device library (-nogpuinc -nogpulib:
# portable.h uses clang's builtins). Embedded in libnccl.so.2 as plain bytes
# (src/device/hip/kernels_blob.S) like the CUDA fatbin: nothing ROCm is linked; a HIP backend
# hands the bytes to hipModuleLoadData. -mcode-object-version=5 is pinned: the default changes
# between clang releases, and the indices in portable.h read v5's implicit kernel arguments.
# -ffp-contract=off: no fused multiply-add, so results are those of the host backend bit for bit.
#
# Sets ACCL_HIP_BUNDLE (the bundle, or an empty file) and, when built, the target
# accl_hip_kernels, ACCL_HIP_BUILT_ARCHS and the tools the bundle test uses.

option(ACCL_HIP_KERNELS "Build the HIP kernels' offload bundle when clang can target AMD GPUs" ON)
set(ACCL_HIP_ARCHS "gfx90a;gfx942;gfx950" CACHE STRING
    "AMD targets for the HIP kernels; those this clang does not know are left out, with a message")
# Debian's clang 15 (behind hipcc 5.2) cannot target gfx942; 19 is the oldest clang tried here.
find_program(ACCL_HIP_CLANG NAMES clang-19 HINTS /usr/lib/llvm-19/bin
             DOC "clang used to build the HIP kernels (clang 19 or newer)")

set(ACCL_HIP_BUILT_ARCHS "")
set(accl_hip_why "")
if(NOT ACCL_HIP_KERNELS)
  set(accl_hip_why "ACCL_HIP_KERNELS=OFF")
elseif(NOT ACCL_HIP_CLANG)
  set(accl_hip_why "clang-19 not found (Debian packages clang-19 lld-19 clang-tools-19: make deps)")
else()
  # The bundle tool and the readers come with the same LLVM as the compiler.
  get_filename_component(accl_hip_real ${ACCL_HIP_CLANG} REALPATH)
  get_filename_component(accl_hip_bin ${accl_hip_real} DIRECTORY)
  find_program(ACCL_HIP_BUNDLER clang-offload-bundler PATHS ${accl_hip_bin} NO_DEFAULT_PATH)
  find_program(ACCL_HIP_READOBJ llvm-readobj PATHS ${accl_hip_bin} NO_DEFAULT_PATH)
  find_program(ACCL_HIP_NM llvm-nm PATHS ${accl_hip_bin} NO_DEFAULT_PATH)
  # Which targets this clang can build, each tried once with the real command line (compiler,
  # lld and the offload bundler all take part); remembered per compiler and target list.
  set(accl_hip_key "${ACCL_HIP_CLANG}|${ACCL_HIP_ARCHS}")
  if(NOT ACCL_HIP_PROBE_KEY STREQUAL accl_hip_key)
    set(probe_dir ${CMAKE_BINARY_DIR}/hip_probe)
    file(WRITE ${probe_dir}/probe.hip "extern \"C\" __attribute__((global)) void accl_probe(int* p) { *p = 1; }\n")
    set(ok "")
    set(refused "")
    foreach(arch ${ACCL_HIP_ARCHS})
      execute_process(
        COMMAND ${ACCL_HIP_CLANG} -x hip --cuda-device-only -nogpuinc -nogpulib --offload-arch=${arch}
                -mcode-object-version=5 --gpu-bundle-output ${probe_dir}/probe.hip -o ${probe_dir}/probe.${arch}
        RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
      if(rc EQUAL 0)
        list(APPEND ok ${arch})
      else()
        string(REGEX REPLACE "\n.*" "" err "${err}")
        string(REGEX REPLACE "[;]" "," err "${err}")  # one list item
        string(REGEX REPLACE "^[^:]*: error: " "" err "${err}")
        list(APPEND refused "${arch} (${err})")
      endif()
    endforeach()
    set(ACCL_HIP_PROBE_KEY "${accl_hip_key}" CACHE INTERNAL "")
    set(ACCL_HIP_PROBE_OK "${ok}" CACHE INTERNAL "")
    set(ACCL_HIP_PROBE_REFUSED "${refused}" CACHE INTERNAL "")
  endif()
  set(ACCL_HIP_BUILT_ARCHS ${ACCL_HIP_PROBE_OK})
  foreach(r ${ACCL_HIP_PROBE_REFUSED})
    message(STATUS "HIP kernels: ${ACCL_HIP_CLANG} cannot build ${r}: left out")
  endforeach()
  if(NOT ACCL_HIP_BUILT_ARCHS)
    set(accl_hip_why "${ACCL_HIP_CLANG} built none of ${ACCL_HIP_ARCHS}")
  endif()
endif()

if(ACCL_HIP_BUILT_ARCHS)
  set(ACCL_HIP_BUNDLE ${CMAKE_BINARY_DIR}/lib/accl_device_kernels.hipfb)
  set(offload)
  foreach(arch ${ACCL_HIP_BUILT_ARCHS})
    list(APPEND offload --offload-arch=${arch})
  endforeach()
  add_custom_command(OUTPUT ${ACCL_HIP_BUNDLE}
    COMMAND ${ACCL_HIP_CLANG} -x hip --cuda-device-only -nogpuinc -nogpulib ${offload}
            -mcode-object-version=5 --gpu-bundle-output -std=c++20 -O3 -ffp-contract=off
            -Wall -Wextra -Werror -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/kernels
            ${CMAKE_SOURCE_DIR}/kernels/hip/device_kernels.hip -o ${ACCL_HIP_BUNDLE}
    DEPENDS ${CMAKE_SOURCE_DIR}/kernels/hip/device_kernels.hip ${ACCL_KERNEL_HEADERS} ${CMAKE_SOURCE_DIR}/include/nccl.h
    COMMENT "clang: HIP kernels for ${ACCL_HIP_BUILT_ARCHS}" VERBATIM)
  add_custom_target(accl_hip_kernels ALL DEPENDS ${ACCL_HIP_BUNDLE})
  install(FILES ${ACCL_HIP_BUNDLE} DESTINATION lib)
  message(STATUS "HIP kernels: ${ACCL_HIP_CLANG}, ${ACCL_HIP_BUILT_ARCHS}")
else()
  set(ACCL_HIP_BUNDLE ${CMAKE_BINARY_DIR}/lib/accl_device_kernels_hip.none)
  file(WRITE ${ACCL_HIP_BUNDLE} "")
  message(STATUS "HIP kernels: not built (${accl_hip_why})")
endif()
set(ACCL_HIP_KERNELS_WHY "${accl_hip_why}")

set(ACCL_HIP_BLOB ${CMAKE_SOURCE_DIR}/src/device/hip/kernels_blob.S)
set_source_files_properties(${ACCL_HIP_BLOB} PROPERTIES
  COMPILE_DEFINITIONS "ACCL_HIP_BUNDLE_PATH=\"${ACCL_HIP_BUNDLE}\""
  OBJECT_DEPENDS ${ACCL_HIP_BUNDLE})
target_sources(accl_internal PRIVATE ${ACCL_HIP_BLOB})
target_sources(nccl PRIVATE ${ACCL_HIP_BLOB})
