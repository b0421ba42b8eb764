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
# End-to-end parity and the decode benchmark on a GPU: tests/gpu/check.sh (docs/CUDA.md).
if(TPGEN_HAVE_CUDA)
  add_executable(test_cuda_ops ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_ops.c)
  target_link_libraries(test_cuda_ops PRIVATE tpgen_kernels ${MATH_LIB})
  add_test(NAME cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(cuda_ops PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
  add_test(NAME cuda_oom_message COMMAND test_cuda_ops --oom)
  set_tests_properties(cuda_oom_message PROPERTIES LABELS gpu TIMEOUT 60
    SKIP_REGULAR_EXPRESSION "SKIPPED: no CUDA GPU"
    PASS_REGULAR_EXPRESSION "out of device memory: a 4 PiB test buffer needs [0-9.]+ MiB, [0-9.]+ MiB free on device 0")

  add_executable(test_nccl_comm ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_nccl_comm.c)
  target_link_libraries(test_nccl_comm PRIVATE tpgen_comm tpgen_kernels tpgen_util ${MATH_LIB})
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
