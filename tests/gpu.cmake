# GPU tests (label gpu), built with the CUDA backend only. Every one reports SKIPPED (exit 77, or
# its SKIPPED line) where no GPU is visible, never passed:
#   cuda_ops          every op of the CUDA backend vs the CPU backend, F16 and BF16, plus graphs
#   cuda_oom_message  an impossible allocation dies naming the buffer, the MiB needed and free
#   nccl_comm         NCCL all-reduce on 2 ranks, one GPU each (skips with fewer GPUs)
#   nccl_shared_gpu   2 ranks on GPU 0: NCCL refuses clearly; the MPI communicator's staged
#                     all-reduce of device buffers is exact
#   cuda_int4_ops     --weights int4's kernels (cuda_int4.cu) against a double reference from the
#                     canonical form, F16 and BF16, int8 matrices beside them (test_cuda_int4.c)
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

  add_executable(test_cuda_ops ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_ops.c)
  target_link_libraries(test_cuda_ops PRIVATE tpgen_kernels ${MATH_LIB})
  add_dependencies(test_cuda_ops tpgen_cuda) # the module it loads
  add_test(NAME cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(cuda_ops PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
  add_test(NAME cuda_oom_message COMMAND test_cuda_ops --oom)
  set_tests_properties(cuda_oom_message PROPERTIES LABELS gpu TIMEOUT 60
    SKIP_REGULAR_EXPRESSION "SKIPPED: no CUDA GPU"
    PASS_REGULAR_EXPRESSION "out of device memory: a 4 PiB test buffer needs [0-9.]+ MiB, [0-9.]+ MiB free on device 0")

  add_executable(test_cuda_int4 ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_int4.c)
  target_link_libraries(test_cuda_int4 PRIVATE tpgen_kernels ${MATH_LIB})
  add_dependencies(test_cuda_int4 tpgen_cuda)
  add_test(NAME cuda_int4_ops COMMAND test_cuda_int4)
  set_tests_properties(cuda_int4_ops PROPERTIES LABELS "gpu;int4" SKIP_RETURN_CODE 77 TIMEOUT 300)

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
