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

  # gpu_emu_info: `tpgen info` on the emulated module names the devices as emulated
  add_test(NAME gpu_emu_info COMMAND $<TARGET_FILE:tpgen> info)
  set_tests_properties(gpu_emu_info PROPERTIES PASS_REGULAR_EXPRESSION "cuda devices: 8 \\(emulated\\)")
  # HF parity through --backend cuda on the emulated device, within hf_parity.sh's GPU tolerances
  # (f16 0.015, bf16 0.08 nats): CodeGen, CodeGen2 and LLaMA/GQA at TP 1, TP 2 over the emulated
  # NCCL and over MPI, CUDA graphs off
  set(EMU_PARITY bash ${CMAKE_CURRENT_SOURCE_DIR}/parity/hf_parity.sh --backend cuda --build ${CMAKE_BINARY_DIR})
  add_test(NAME gpu_emu_parity_codegen_f16 COMMAND ${EMU_PARITY} --dtype f16 --fixtures ${TPGEN_TEST_DATA}/tiny-f32)
  add_test(NAME gpu_emu_parity_codegen_bf16 COMMAND ${EMU_PARITY} --dtype bf16 --fixtures ${TPGEN_TEST_DATA}/tiny-f32)
  add_test(NAME gpu_emu_parity_codegen2_f16 COMMAND ${EMU_PARITY} --dtype f16 --fixtures ${TPGEN_TEST_DATA}/codegen2-f32)
  add_test(NAME gpu_emu_parity_llama_gqa_bf16 COMMAND ${EMU_PARITY} --dtype bf16
           --fixtures ${TPGEN_TEST_DATA}/llama-gqa-bf16-sharded)
  add_test(NAME gpu_emu_parity_codegen_f16_no_graphs COMMAND ${EMU_PARITY} --dtype f16 --extra=--no-cuda-graphs
           --fixtures ${TPGEN_TEST_DATA}/tiny-f32)
  add_test(NAME gpu_emu_parity_tp2_nccl COMMAND ${EMU_PARITY} --dtype f16 --np 2 --comm nccl
           --fixtures ${TPGEN_TEST_DATA}/tiny-f32)
  add_test(NAME gpu_emu_parity_tp2_mpi COMMAND ${EMU_PARITY} --dtype bf16 --np 2 --comm mpi
           --fixtures ${TPGEN_TEST_DATA}/llama-gqa-bf16-sharded)
  set(EMU_TESTS gpu_emu_info gpu_emu_parity_codegen_f16 gpu_emu_parity_codegen_bf16 gpu_emu_parity_codegen2_f16
      gpu_emu_parity_llama_gqa_bf16 gpu_emu_parity_codegen_f16_no_graphs gpu_emu_parity_tp2_nccl gpu_emu_parity_tp2_mpi)
  # faults the emulator catches, planted one at a time (tests/gpu/emu/test_emu_faults.cpp)
  add_executable(test_emu_faults ${EMU_DIR}/test_emu_faults.cpp ${EMU_DIR}/emu.cpp ${EMU_DIR}/emu_rt.cpp
                 ${EMU_DIR}/emu_blas.cpp)
  set_source_files_properties(${EMU_DIR}/test_emu_faults.cpp PROPERTIES COMPILE_OPTIONS "-std=c++17")
  target_include_directories(test_emu_faults PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_emu_faults PRIVATE tpgen_util PkgConfig::OPENBLAS Threads::Threads ${MATH_LIB})
  set(EMU_FAULT bash ${TPGEN_EXPECT_ERROR})
  add_test(NAME gpu_emu_fault_host_pointer COMMAND ${EMU_FAULT}
           "kernel fill_kernel: argument 1 \\(0x[0-9a-f]+\\) is a host pointer" $<TARGET_FILE:test_emu_faults> host-pointer)
  add_test(NAME gpu_emu_fault_past_end COMMAND ${EMU_FAULT}
           "kernel fill_kernel: an access at 0x[0-9a-f]+, [0-9]+ bytes past the end of device allocation #1 \\(400 bytes"
           $<TARGET_FILE:test_emu_faults> past-end)
  add_test(NAME gpu_emu_fault_copy_direction COMMAND ${EMU_FAULT}
           "cudaMemcpyAsync\\(.*cudaMemcpyDeviceToHost\\): the destination 0x[0-9a-f]+ is device memory"
           $<TARGET_FILE:test_emu_faults> copy-direction)
  add_test(NAME gpu_emu_fault_gemm_ld COMMAND ${EMU_FAULT}
           "cublasGemmEx: matrix A \\(8 x 8, ld 16, CUDA_R_16F\\) spans 240 bytes .*: 112 bytes past its end"
           $<TARGET_FILE:test_emu_faults> gemm-ld)
  add_test(NAME gpu_emu_graph_replays_captured_value COMMAND test_emu_faults graph-value)
  # every op of the module against the CPU backend (test_cuda_ops, F16 and BF16, graphs), on the
  # emulated device: the kernels of every .cu but the int8 ones (gpu_emu_cuda_int8, tests/gpu_emu_faults.cmake)
  add_test(NAME gpu_emu_cuda_ops COMMAND test_cuda_ops 20261206)
  list(APPEND EMU_TESTS gpu_emu_cuda_ops)
  list(APPEND EMU_TESTS gpu_emu_fault_host_pointer gpu_emu_fault_past_end gpu_emu_fault_copy_direction
       gpu_emu_fault_gemm_ld gpu_emu_graph_replays_captured_value)
  set_tests_properties(${EMU_TESTS} PROPERTIES LABELS "gpu_emu;mpi" TIMEOUT 300
                       ENVIRONMENT "TPGEN_CUDA_MODULE=$<TARGET_FILE:tpgen_cuda_emu>")
endif()
