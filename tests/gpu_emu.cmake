# The emulated device (tests/gpu/emu, docs/CUDA.md "The emulated device"): lib/libtpgen-cuda-emu.so
# is the CUDA module built from the unchanged sources of kernels/cuda and comm/comm_nccl.c for
# the host (cu_for_host.py rewrites each .cu's launches), against an emulated CUDA runtime,
# cuBLAS/cuBLASLt (OpenBLAS) and NCCL (MPI). TPGEN_CUDA_MODULE=lib/libtpgen-cuda-emu.so runs
# `--backend cuda` on it. Built wherever the CUDA module is (the CUDA headers are there); not
# under ThreadSanitizer (coroutine stacks). Tests: label gpu_emu.
if(TPGEN_HAVE_CUDA AND NOT TPGEN_SANITIZE MATCHES "thread")
  find_program(TPGEN_PYTHON3 python3 REQUIRED)
  find_package(Threads REQUIRED)
  set(EMU_DIR ${CMAKE_CURRENT_SOURCE_DIR}/gpu/emu)
  set(EMU_GEN ${CMAKE_CURRENT_BINARY_DIR}/emu_gen)
  file(GLOB EMU_CU CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
  set(EMU_HOST_SRC "")
  foreach(cu ${EMU_CU})
    get_filename_component(stem ${cu} NAME_WE)
    add_custom_command(OUTPUT ${EMU_GEN}/${stem}.host.cpp
      COMMAND ${CMAKE_COMMAND} -E make_directory ${EMU_GEN}
      COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/cu_for_host.py kernel ${cu} ${EMU_GEN}/${stem}.host.cpp
      DEPENDS ${EMU_DIR}/cu_for_host.py ${cu}
      COMMENT "tests/gpu/emu: ${stem}.cu rewritten for the host")
    list(APPEND EMU_HOST_SRC ${EMU_GEN}/${stem}.host.cpp)
  endforeach()
  add_custom_command(OUTPUT ${EMU_GEN}/cuda_device_helpers.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${EMU_GEN}
    COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/cu_for_host.py helpers ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_internal.h
            ${EMU_GEN}/cuda_device_helpers.h
    DEPENDS ${EMU_DIR}/cu_for_host.py ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_internal.h)
  add_custom_target(tpgen_cuda_emu_gen DEPENDS ${EMU_GEN}/cuda_device_helpers.h)
  file(GLOB EMU_C CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.c)
  add_library(tpgen_cuda_emu MODULE ${EMU_HOST_SRC} ${EMU_C} ${CMAKE_SOURCE_DIR}/kernels/mem_plan.c
              ${CMAKE_SOURCE_DIR}/comm/comm_nccl.c ${EMU_DIR}/emu.cpp ${EMU_DIR}/emu_rt.cpp ${EMU_DIR}/emu_blas.cpp
              ${EMU_DIR}/emu_nccl.cpp)
  add_dependencies(tpgen_cuda_emu tpgen_cuda_emu_gen)
  target_include_directories(tpgen_cuda_emu PRIVATE ${EMU_GEN} ${CUDAToolkit_INCLUDE_DIRS} ${NCCL_INCLUDE})
  target_compile_definitions(tpgen_cuda_emu PRIVATE TPGEN_CUDA_IFACE="${TPGEN_CUDA_IFACE}")
  # CUDA source under a host compiler: the kernels read uint4 as __half2 (type punning nvcc
  # allows: -fno-strict-aliasing), and nvcc's #pragma unroll, "/*" inside a comment's path are
  # not warnings here; every rewritten .cu sees emu.h's definitions of CUDA's keywords first
  set_source_files_properties(${EMU_HOST_SRC} PROPERTIES COMPILE_OPTIONS
    "-std=c++17;-fno-strict-aliasing;-Wno-unknown-pragmas;-Wno-comment;-include;${EMU_DIR}/emu.h")
  set_source_files_properties(${EMU_DIR}/emu.cpp ${EMU_DIR}/emu_rt.cpp ${EMU_DIR}/emu_blas.cpp ${EMU_DIR}/emu_nccl.cpp
    PROPERTIES COMPILE_OPTIONS "-std=c++17")
  target_link_libraries(tpgen_cuda_emu PRIVATE PkgConfig::OPENBLAS MPI::MPI_C Threads::Threads ${MATH_LIB})
  set_target_properties(tpgen_cuda_emu PROPERTIES OUTPUT_NAME tpgen-cuda-emu LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
                        C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  add_dependencies(tpgen tpgen_cuda_emu) # built by default, beside lib/libtpgen-cuda.so
  set(TPGEN_CUDA_EMU $<TARGET_FILE:tpgen_cuda_emu>)
endif()
