# GPU tests (label gpu), built with the CUDA backend only. Every one reports SKIPPED (exit 77, or
# its SKIPPED line) where no GPU is visible, never passed:
#   cuda_ops          every op of the CUDA backend vs the CPU backend, F16 and BF16, plus graphs
#   cuda_oom_message  an impossible allocation dies naming the buffer, the MiB needed and free
#   nccl_comm         NCCL all-reduce on 2 ranks, one GPU each (skips with fewer GPUs)
#   nccl_shared_gpu   2 ranks on GPU 0: NCCL refuses clearly; the MPI communicator's staged
#                     all-reduce of device buffers is exact
#   bw_copy_smoke     the copy-bandwidth probe runs (tests/gpu/check.sh uses it at 1 GiB)
#   nccl_watchdog     rank 1 skips an all-reduce: rank 0's watchdog aborts it within --comm-timeout,
#                     names the rank and the collective, and the job exits non-zero
#   cuda_module_*     the CUDA module (lib/libtpgen-cuda.so, kernels/cuda_module.h), on any machine:
#                     --backend cuda loads it (its symbols resolve in tpgen, its entry points and
#                     interface hash match) and then runs on a GPU or stops for lack of one; a
#                     missing, broken or foreign module, one of another build and one without
#                     entry points are each named; no driver: never loaded
#                     (the op tests above also load it before they skip)
# End-to-end parity and the decode benchmark on a GPU: tests/gpu/check.sh (docs/CUDA.md).
if(TPGEN_HAVE_CUDA)
  set(CUDA_MOD_RUN ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate --model ${TPGEN_TEST_DATA}/tiny-f32
      --prompt-ids 1,2 --max-new-tokens 2 --backend cuda --comm mpi) # --comm mpi: 2 ranks may share 1 GPU
  add_test(NAME cuda_module_loads COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cuda_module.sh loads ${CUDA_MOD_RUN} --verbose)
  set(CUDA_MOD_ERR bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh)
  add_test(NAME errors_cuda_module_missing COMMAND ${CUDA_MOD_ERR}
           "--backend cuda: TPGEN_CUDA_MODULE: tried /nonexistent/libtpgen-cuda.so \\(No such file or directory\\)"
           ${CUDA_MOD_RUN})
  add_test(NAME errors_cuda_module_broken COMMAND ${CUDA_MOD_ERR}
           "the CUDA backend module .*/README.md did not load: .*" ${CUDA_MOD_RUN})
  add_test(NAME errors_cuda_module_foreign COMMAND ${CUDA_MOD_ERR}
           "the CUDA backend module .*libcudart.* was built from other sources than this tpgen \\(it has no tpcuda_interface\\)"
           ${CUDA_MOD_RUN})
  # stand-ins: another build's interface hash; this build's hash without the entry points
  add_library(test_fake_cuda_other MODULE ${CMAKE_CURRENT_SOURCE_DIR}/gpu/fake_cuda_module.c)
  target_compile_definitions(test_fake_cuda_other PRIVATE FAKE_IFACE="0000000000000000")
  add_library(test_fake_cuda_same MODULE ${CMAKE_CURRENT_SOURCE_DIR}/gpu/fake_cuda_module.c)
  target_compile_definitions(test_fake_cuda_same PRIVATE FAKE_IFACE="${TPGEN_CUDA_IFACE}")
  add_test(NAME errors_cuda_module_other_build COMMAND ${CUDA_MOD_ERR}
           "built from other sources than this tpgen \\(its interface hash is 0000000000000000, this tpgen's [0-9a-f]{16}\\)"
           ${CUDA_MOD_RUN})
  add_test(NAME errors_cuda_module_no_entry COMMAND ${CUDA_MOD_ERR}
           "built from other sources than this tpgen \\(it lacks tpcuda_device_count\\)" ${CUDA_MOD_RUN})
  set_tests_properties(cuda_module_loads errors_cuda_module_missing errors_cuda_module_broken errors_cuda_module_foreign
                       errors_cuda_module_other_build errors_cuda_module_no_entry
                       PROPERTIES LABELS "gpu;errors;mpi" TIMEOUT 90)
  set_tests_properties(errors_cuda_module_other_build PROPERTIES ENVIRONMENT "TPGEN_CUDA_MODULE=$<TARGET_FILE:test_fake_cuda_other>")
  set_tests_properties(errors_cuda_module_no_entry PROPERTIES ENVIRONMENT "TPGEN_CUDA_MODULE=$<TARGET_FILE:test_fake_cuda_same>")
  set_tests_properties(errors_cuda_module_missing PROPERTIES ENVIRONMENT "TPGEN_CUDA_MODULE=/nonexistent/libtpgen-cuda.so")
  set_tests_properties(errors_cuda_module_broken PROPERTIES ENVIRONMENT "TPGEN_CUDA_MODULE=${CMAKE_SOURCE_DIR}/README.md")
  set_tests_properties(errors_cuda_module_foreign PROPERTIES ENVIRONMENT "TPGEN_CUDA_MODULE=$<TARGET_FILE:CUDA::cudart>")
  add_test(NAME cuda_module_not_loaded_without_driver
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cuda_module.sh no-driver $<TARGET_FILE:tpgen>)
  set_tests_properties(cuda_module_not_loaded_without_driver PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77 TIMEOUT 60
                       ENVIRONMENT "TPGEN_CUDA_MODULE=/nonexistent/libtpgen-cuda.so")

  # cuda_emu (label unit): the kernels of cuda_norm_act.cu and cuda_attention.cu run on the host
  # (tests/gpu/emu: a block's threads as coroutines; cu_for_host.py rewrites the launches), checked
  # by test_cuda_ops' cases against the CPU backend, so CI without a GPU runs the kernels' code.
  # Not under ThreadSanitizer (coroutine stacks); under AddressSanitizer it checks every access.
  if(NOT TPGEN_SANITIZE MATCHES "thread")
    find_program(TPGEN_PYTHON3 python3 REQUIRED)
    set(EMU_DIR ${CMAKE_CURRENT_SOURCE_DIR}/gpu/emu)
    set(EMU_GEN ${CMAKE_CURRENT_BINARY_DIR}/emu_gen)
    set(EMU_OUT ${EMU_GEN}/cuda_device_helpers.h ${EMU_GEN}/cuda_attention.host.cpp ${EMU_GEN}/cuda_norm_act.host.cpp)
    add_custom_command(OUTPUT ${EMU_OUT}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${EMU_GEN}
      COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/cu_for_host.py helpers ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_internal.h
              ${EMU_GEN}/cuda_device_helpers.h
      COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/cu_for_host.py kernel ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_attention.cu
              ${EMU_GEN}/cuda_attention.host.cpp
      COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/cu_for_host.py kernel ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_norm_act.cu
              ${EMU_GEN}/cuda_norm_act.host.cpp
      DEPENDS ${EMU_DIR}/cu_for_host.py ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_internal.h
              ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_attention.cu ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_norm_act.cu
      COMMENT "tests/gpu/emu: CUDA kernels rewritten for the host emulator")
    add_executable(test_cuda_emu ${EMU_DIR}/test_cuda_emu.c ${EMU_DIR}/emu.cpp ${EMU_DIR}/emu_backend.cpp ${EMU_OUT})
    set_source_files_properties(${EMU_OUT} PROPERTIES HEADER_FILE_ONLY ON) # included by emu_backend.cpp
    # CUDA source under a host compiler: it reads uint4 as __half2 (type punning nvcc allows:
    # -fno-strict-aliasing), and nvcc's #pragma unroll, a "/*" in a comment's path and the
    # variables only a CUDA_CHECK (a no-op here) would use are not warnings here
    set_source_files_properties(${EMU_DIR}/emu.cpp ${EMU_DIR}/emu_backend.cpp PROPERTIES COMPILE_OPTIONS
      "-std=c++17;-fno-strict-aliasing;-Wall;-Wno-unknown-pragmas;-Wno-comment;-Wno-unused-variable")
    target_include_directories(test_cuda_emu PRIVATE ${EMU_GEN} ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(test_cuda_emu PRIVATE tpgen_kernels ${MATH_LIB})
    add_test(NAME cuda_emu COMMAND test_cuda_emu 20261205) # a fixed seed: CI is repeatable; run it by hand without one for fresh draws
    set_tests_properties(cuda_emu PROPERTIES LABELS "unit;gpu_emu" TIMEOUT 300)
    # shapes the CUDA backend refuses with a message (before any kernel runs)
    set(EMU_ERR bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh)
    add_test(NAME cuda_emu_refuses_kv_heads COMMAND ${EMU_ERR}
             "cuda attention: 4 query heads over 3 KV heads: the KV heads must divide the query heads"
             $<TARGET_FILE:test_cuda_emu> --bad kv-heads)
    add_test(NAME cuda_emu_refuses_rotary_dim COMMAND ${EMU_ERR}
             "cuda rotary: rotary_dim 5 must be even and in 0\\.\\.min\\(head_dim 8, 256\\)"
             $<TARGET_FILE:test_cuda_emu> --bad rotary-dim)
    add_test(NAME cuda_emu_refuses_rope_style COMMAND ${EMU_ERR} "cuda rotary: unknown rotary style 7"
             $<TARGET_FILE:test_cuda_emu> --bad rope-style)
    set_tests_properties(cuda_emu_refuses_kv_heads cuda_emu_refuses_rotary_dim cuda_emu_refuses_rope_style
                         PROPERTIES LABELS "unit;gpu_emu;errors" TIMEOUT 60)
  endif()

  add_executable(test_cuda_ops ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_ops.c)
  target_link_libraries(test_cuda_ops PRIVATE tpgen_kernels ${MATH_LIB})
  add_dependencies(test_cuda_ops tpgen_cuda) # the module it loads
  add_test(NAME cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(cuda_ops PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
  add_test(NAME cuda_oom_message COMMAND test_cuda_ops --oom)
  set_tests_properties(cuda_oom_message PROPERTIES LABELS gpu TIMEOUT 60
    SKIP_REGULAR_EXPRESSION "SKIPPED: no CUDA GPU"
    PASS_REGULAR_EXPRESSION "out of device memory: a 4 PiB test buffer needs [0-9.]+ MiB, [0-9.]+ MiB free on device 0")

  add_executable(test_nccl_comm ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_nccl_comm.c)
  target_link_libraries(test_nccl_comm PRIVATE tpgen_comm tpgen_kernels tpgen_util ${MATH_LIB})
  add_dependencies(test_nccl_comm tpgen_cuda)
  add_test(NAME nccl_comm COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:test_nccl_comm>)
  set_tests_properties(nccl_comm PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77 TIMEOUT 180)
  add_test(NAME nccl_shared_gpu COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:test_nccl_comm> --shared)
  set_tests_properties(nccl_shared_gpu PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77 TIMEOUT 180)

  # the NCCL watchdog: a stuck all-reduce ends the job non-zero, naming the rank and collective
  add_test(NAME nccl_watchdog COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu/watchdog.sh ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS}
           -np 2 $<TARGET_FILE:test_nccl_comm> --watchdog)
  set_tests_properties(nccl_watchdog PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77 TIMEOUT 120)

  add_executable(bw_copy ${CMAKE_CURRENT_SOURCE_DIR}/gpu/bw_copy.cu)
  set_target_properties(bw_copy PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
  add_test(NAME bw_copy_smoke COMMAND bw_copy 64)
  set_tests_properties(bw_copy_smoke PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 60)
endif()
