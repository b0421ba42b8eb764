# The emulated device's fault and coverage tests (issue 40; docs/CUDA.md "The emulated device"),
# beside tests/gpu_emu.cmake, whose module (tpgen_cuda_emu) and tests they use. Label gpu_emu.
#   gpu_emu_fault_missing_barrier   a copy of the module with one __syncthreads() removed from
#                                   rotary_kv_kernel (drop_barrier.py, at build time from the real
#                                   source) gives other results under the seeded random thread
#                                   order; the real module is the same under every order
#   gpu_emu_fault_allreduce_count   2 ranks all-reduce different counts / types through
#   gpu_emu_fault_allreduce_type    comm_nccl.c: the emulated NCCL ends the job, naming both
#   gpu_emu_cuda_int8               the int8 kernels against the CPU backend (quick shapes)
#   gpu_emu_cuda_int4               the int4 kernels against a double reference (quick shapes;
#                                   tests/gpu/test_cuda_int4.c)
#   gpu_emu_int4_bad_*              a bad int4 matrix (group size, columns, a q or zero past 15)
#                                   ends the job naming it
#   gpu_emu_gemm_fallback           the GEMMs with cuBLASLt finding no algorithm: the module's
#                                   fallback kernels (bias, GELU) and the empty product (K = 0)
#   gpu_emu_kernels_launched        every __global__ of kernels/cuda/*.cu is in the launch reports
#                                   (TPGEN_EMU_REPORT) of gpu_emu_cuda_ops, gpu_emu_cuda_int8,
#                                   gpu_emu_cuda_int4 and gpu_emu_gemm_fallback (ctest fixtures: they run first, after
#                                   gpu_emu_report_reset empties the reports)
if(TARGET tpgen_cuda_emu)
  set(EMU_FAULT_ENV "TPGEN_CUDA_MODULE=$<TARGET_FILE:tpgen_cuda_emu>")

  # ---- the missing barrier: the module again, cuda_attention.cu replaced by its copy ----
  set(EMU_MUT ${EMU_GEN}/nobarrier)
  add_custom_command(OUTPUT ${EMU_MUT}/cuda_attention.cu ${EMU_MUT}/cuda_attention.host.cpp
    COMMAND ${CMAKE_COMMAND} -E make_directory ${EMU_MUT}
    COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/drop_barrier.py ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_attention.cu
            rotary_kv_kernel 1 ${EMU_MUT}/cuda_attention.cu
    COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/cu_for_host.py kernel ${EMU_MUT}/cuda_attention.cu ${EMU_MUT}/cuda_attention.host.cpp
    DEPENDS ${EMU_DIR}/drop_barrier.py ${EMU_DIR}/cu_for_host.py ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_attention.cu
    COMMENT "tests/gpu/emu: cuda_attention.cu without rotary_kv_kernel's first barrier")
  # every other object of the emulated module, as built for it
  add_library(tpgen_cuda_emu_nobarrier MODULE ${EMU_MUT}/cuda_attention.host.cpp
              $<FILTER:$<TARGET_OBJECTS:tpgen_cuda_emu>,EXCLUDE,/cuda_attention\\.host\\.cpp\\.o$>)
  add_dependencies(tpgen_cuda_emu_nobarrier tpgen_cuda_emu)
  target_include_directories(tpgen_cuda_emu_nobarrier PRIVATE ${EMU_GEN} ${CUDAToolkit_INCLUDE_DIRS} ${NCCL_INCLUDE})
  target_compile_definitions(tpgen_cuda_emu_nobarrier PRIVATE TPGEN_CUDA_IFACE="${TPGEN_CUDA_IFACE}")
  set_source_files_properties(${EMU_MUT}/cuda_attention.host.cpp PROPERTIES COMPILE_OPTIONS
    "-std=c++17;-fno-strict-aliasing;-Wno-unknown-pragmas;-Wno-comment;-include;${EMU_DIR}/emu.h")
  target_link_libraries(tpgen_cuda_emu_nobarrier PRIVATE PkgConfig::OPENBLAS MPI::MPI_C Threads::Threads ${MATH_LIB})
  set_target_properties(tpgen_cuda_emu_nobarrier PROPERTIES C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  add_executable(test_emu_barrier ${EMU_DIR}/test_emu_barrier.c)
  target_link_libraries(test_emu_barrier PRIVATE tpgen_kernels ${MATH_LIB})
  add_test(NAME gpu_emu_fault_missing_barrier COMMAND bash ${EMU_DIR}/missing_barrier.sh $<TARGET_FILE:tpgen_cuda_emu>
           $<TARGET_FILE:tpgen_cuda_emu_nobarrier> $<TARGET_FILE:test_emu_barrier> 1 2 3)

  # ---- an all-reduce the ranks disagree on, through comm_nccl.c and the emulated NCCL ----
  set(EMU_NCCL_RUN ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:test_nccl_comm>)
  add_test(NAME gpu_emu_fault_allreduce_count COMMAND bash ${TPGEN_EXPECT_ERROR}
           "ncclAllReduce: the ranks disagree: rank 0 reduces count 1000 of f16, rank 1 count 1008 of f16"
           ${EMU_NCCL_RUN} --count-mismatch)
  add_test(NAME gpu_emu_fault_allreduce_type COMMAND bash ${TPGEN_EXPECT_ERROR}
           "ncclAllReduce: the ranks disagree: rank 0 reduces count 1000 of f16, rank 1 count 1000 of bf16"
           ${EMU_NCCL_RUN} --type-mismatch)

  # ---- every __global__ launched: the launch reports of three tests, then the check ----
  set(EMU_REPORTS ${CMAKE_CURRENT_BINARY_DIR}/emu_report_cuda_ops.txt ${CMAKE_CURRENT_BINARY_DIR}/emu_report_int8.txt
      ${CMAKE_CURRENT_BINARY_DIR}/emu_report_gemm_fallback.txt ${CMAKE_CURRENT_BINARY_DIR}/emu_report_int4.txt)
  add_test(NAME gpu_emu_report_reset COMMAND ${CMAKE_COMMAND} -E rm -f ${EMU_REPORTS})
  set_tests_properties(gpu_emu_report_reset PROPERTIES FIXTURES_SETUP emu_report_reset LABELS gpu_emu TIMEOUT 30)
  add_test(NAME gpu_emu_cuda_int8 COMMAND test_cuda_int8 20261206 quick)
  add_test(NAME gpu_emu_cuda_int4 COMMAND test_cuda_int4 20261206 quick)
  add_test(NAME gpu_emu_gemm_fallback COMMAND test_cuda_ops 20261206 gemms)
  set_tests_properties(gpu_emu_gemm_fallback PROPERTIES ENVIRONMENT "TPGEN_EMU_LT_ALGOS=0")
  list(GET EMU_REPORTS 0 r_ops)
  list(GET EMU_REPORTS 1 r_int8)
  list(GET EMU_REPORTS 2 r_fallback)
  list(GET EMU_REPORTS 3 r_int4)
  set_property(TEST gpu_emu_cuda_ops APPEND PROPERTY ENVIRONMENT "TPGEN_EMU_REPORT=${r_ops}")
  set_property(TEST gpu_emu_cuda_int8 APPEND PROPERTY ENVIRONMENT "TPGEN_EMU_REPORT=${r_int8}")
  set_property(TEST gpu_emu_gemm_fallback APPEND PROPERTY ENVIRONMENT "TPGEN_EMU_REPORT=${r_fallback}")
  set_property(TEST gpu_emu_cuda_int4 APPEND PROPERTY ENVIRONMENT "TPGEN_EMU_REPORT=${r_int4}")
  set_tests_properties(gpu_emu_cuda_ops gpu_emu_cuda_int8 gpu_emu_cuda_int4 gpu_emu_gemm_fallback PROPERTIES
                       FIXTURES_REQUIRED emu_report_reset FIXTURES_SETUP emu_launch_reports)
  add_test(NAME gpu_emu_kernels_launched COMMAND ${TPGEN_PYTHON3} ${EMU_DIR}/kernels_launched.py
           ${CMAKE_SOURCE_DIR}/kernels/cuda ${EMU_REPORTS})
  set_tests_properties(gpu_emu_kernels_launched PROPERTIES FIXTURES_REQUIRED emu_launch_reports)

  # ---- bad int4 matrices: the backend dies naming the shape, group or value ----
  set(EMU_INT4_BAD bash ${TPGEN_EXPECT_ERROR})
  add_test(NAME gpu_emu_int4_bad_group COMMAND ${EMU_INT4_BAD}
           "cuda int4: matrix_bytes_q4: group size 48 of a \\[8, 96\\] matrix: must be a positive multiple of 32"
           $<TARGET_FILE:test_cuda_int4> 1 bad-group)
  add_test(NAME gpu_emu_int4_bad_cols COMMAND ${EMU_INT4_BAD}
           "cuda int4: matrix_bytes_q4: a \\[8, 96\\] matrix has 96 columns, not a multiple of its group size 64"
           $<TARGET_FILE:test_cuda_int4> 1 bad-cols)
  add_test(NAME gpu_emu_int4_bad_q COMMAND ${EMU_INT4_BAD}
           "cuda int4: matrix_upload_q4: q\\[5, 33\\] = 16 of a \\[8, 64\\] matrix is not a 4-bit value \\(0..15\\)"
           $<TARGET_FILE:test_cuda_int4> 1 bad-q)
  add_test(NAME gpu_emu_int4_bad_zero COMMAND ${EMU_INT4_BAD}
           "cuda int4: matrix_upload_q4: zero\\[3, 1\\] = 200 of a \\[8, 64\\] matrix is not a 4-bit value"
           $<TARGET_FILE:test_cuda_int4> 1 bad-zero)
  set_tests_properties(gpu_emu_int4_bad_group gpu_emu_int4_bad_cols gpu_emu_int4_bad_q gpu_emu_int4_bad_zero
                       PROPERTIES LABELS "gpu_emu;errors" TIMEOUT 60 ENVIRONMENT "${EMU_FAULT_ENV}")

  set(EMU_COVER_TESTS gpu_emu_fault_missing_barrier gpu_emu_fault_allreduce_count gpu_emu_fault_allreduce_type
      gpu_emu_cuda_int8 gpu_emu_cuda_int4 gpu_emu_gemm_fallback gpu_emu_kernels_launched)
  set_tests_properties(${EMU_COVER_TESTS} PROPERTIES LABELS "gpu_emu;mpi" TIMEOUT 120)
  set_property(TEST ${EMU_COVER_TESTS} APPEND PROPERTY ENVIRONMENT "${EMU_FAULT_ENV}")
endif()
