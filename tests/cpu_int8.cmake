# int8 weights (--weights int8, label int8): op tests of the CPU kernels against a double
# reference of the dequantized weights, each GEMV ISA and each GEMM path forced in turn
# (SKIPPED where this CPU lacks the ISA); end to end on the fixtures and the tiny model against
# the f32 run (tests/cpu_int8/parity_int8.sh) at TP 1 and 2; bad input (label errors).
add_executable(test_int8_ops ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int8/test_int8_ops.c)
target_link_libraries(test_int8_ops PRIVATE tpgen_kernels ${MATH_LIB})
foreach(isa c avx2 avxvnni avx512 amx)
  foreach(gemm gemv blas auto)
    add_test(NAME int8_ops_${isa}_${gemm} COMMAND test_int8_ops 2 ${isa} ${gemm})
    set_tests_properties(int8_ops_${isa}_${gemm} PROPERTIES LABELS "unit;int8" SKIP_RETURN_CODE 77 TIMEOUT 120)
  endforeach()
endforeach()
# each tier's int8 GEMM for every T (SKIPPED where this CPU lacks the tier), with 2 and 3 threads
foreach(isa avx2 avxvnni avx512 amx)
  add_test(NAME int8_ops_${isa}_gemm COMMAND test_int8_ops 2 ${isa} gemm)
  set_tests_properties(int8_ops_${isa}_gemm PROPERTIES LABELS "unit;int8" SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()
add_test(NAME int8_ops_3threads_gemm COMMAND test_int8_ops 3 avx2 gemm)
set_tests_properties(int8_ops_3threads_gemm PROPERTIES LABELS "unit;int8" SKIP_RETURN_CODE 77 TIMEOUT 120)
add_test(NAME int8_ops_3threads_amx_gemm COMMAND test_int8_ops 3 amx gemm)
set_tests_properties(int8_ops_3threads_amx_gemm PROPERTIES LABELS "unit;int8" SKIP_RETURN_CODE 77 TIMEOUT 120)
add_test(NAME int8_ops_3threads COMMAND test_int8_ops 3 avx2 auto)
set_tests_properties(int8_ops_3threads PROPERTIES LABELS "unit;int8" SKIP_RETURN_CODE 77 TIMEOUT 120)
add_test(NAME parity_int8_tp1_tp2
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int8/parity_int8.sh --np 1,2 --build ${CMAKE_BINARY_DIR})
set_tests_properties(parity_int8_tp1_tp2 PROPERTIES LABELS "parity;mpi;int8" TIMEOUT 400)
# Bad input (label errors), through tests/errors/expect_error.sh: a clear message, once, non-zero.
set(INT8_ERR bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh)
set(INT8_RUN ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate --model ${TPGEN_TEST_DATA}/tiny-f32
    --prompt-ids 1,2 --max-new-tokens 2 --backend cpu --threads 1)
add_test(NAME errors_int8_bad_value COMMAND ${INT8_ERR} "--weights must be int8 or int4 .*got \"int2\"" ${INT8_RUN}
         --weights int2)
add_test(NAME errors_int8_with_bf16 COMMAND ${INT8_ERR} "--weights int8 on the CPU .* cannot be combined with --dtype bf16"
         ${INT8_RUN} --weights int8 --dtype bf16)
add_test(NAME errors_int8_isa COMMAND ${INT8_ERR} "TPGEN_CPU_ISA=sse9: expected amx, avx512, avxvnni, avx2 or c" ${INT8_RUN}
         --weights int8)
# TPGEN_CPU_ISA is shared by every family: the f32 backend refuses a bad value at creation too
add_test(NAME errors_cpu_isa_f32 COMMAND ${INT8_ERR} "TPGEN_CPU_ISA=sse9: expected amx, avx512, avxvnni, avx2 or c" ${INT8_RUN})
set_tests_properties(errors_cpu_isa_f32 PROPERTIES LABELS "errors;mpi;int8" TIMEOUT 90
                     ENVIRONMENT "TPGEN_CPU_ISA=sse9;OMPI_MCA_odls_base_sigkill_timeout=0")
add_test(NAME errors_int8_old_isa_env COMMAND ${INT8_ERR} "TPGEN_INT8_ISA=avx2: this variable is gone; TPGEN_CPU_ISA="
         ${INT8_RUN} --weights int8)
add_test(NAME errors_int8_gemm_value COMMAND ${INT8_ERR} "TPGEN_INT8_GEMM=fast: expected gemv, gemm or blas" ${INT8_RUN}
         --weights int8)
add_test(NAME errors_int8_gemm_needs_avx2 COMMAND ${INT8_ERR} "TPGEN_INT8_GEMM=gemm: the int8 GEMM kernel needs AVX2 or better"
         ${INT8_RUN} --weights int8)
set_tests_properties(errors_int8_bad_value errors_int8_with_bf16 errors_int8_isa PROPERTIES LABELS "errors;mpi;int8"
                     TIMEOUT 90 ENVIRONMENT "OMPI_MCA_odls_base_sigkill_timeout=0")
set_tests_properties(errors_int8_isa PROPERTIES ENVIRONMENT "TPGEN_CPU_ISA=sse9;OMPI_MCA_odls_base_sigkill_timeout=0")
set_tests_properties(errors_int8_old_isa_env PROPERTIES LABELS "errors;mpi;int8" TIMEOUT 90
                     ENVIRONMENT "TPGEN_INT8_ISA=avx2;OMPI_MCA_odls_base_sigkill_timeout=0")
set_tests_properties(errors_int8_gemm_value errors_int8_gemm_needs_avx2 PROPERTIES LABELS "errors;mpi;int8" TIMEOUT 90)
set_tests_properties(errors_int8_gemm_value PROPERTIES
                     ENVIRONMENT "TPGEN_INT8_GEMM=fast;OMPI_MCA_odls_base_sigkill_timeout=0")
set_tests_properties(errors_int8_gemm_needs_avx2 PROPERTIES
                     ENVIRONMENT "TPGEN_INT8_GEMM=gemm;TPGEN_CPU_ISA=c;OMPI_MCA_odls_base_sigkill_timeout=0")
if(NOT TPGEN_HAVE_CUDA)
  add_test(NAME errors_int8_cuda_not_built COMMAND ${INT8_ERR} "built without the CUDA backend" ${INT8_RUN} --weights int8
           --backend cuda)
  set_tests_properties(errors_int8_cuda_not_built PROPERTIES LABELS "errors;mpi;int8" TIMEOUT 90
                       ENVIRONMENT "OMPI_MCA_odls_base_sigkill_timeout=0")
endif()
# GEMM rates f32 vs int8 (GEMV and panel paths) on CodeGen shapes (built, not a test; docs/PERFORMANCE.md)
add_executable(bench_int8_gemm ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int8/bench_int8_gemm.c)
target_link_libraries(bench_int8_gemm PRIVATE tpgen_kernels ${MATH_LIB})
# The CUDA backend's int8 path against the CPU's (label gpu): SKIPPED without a GPU.
if(TPGEN_HAVE_CUDA)
  add_executable(test_cuda_int8 ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_int8.c)
  target_link_libraries(test_cuda_int8 PRIVATE tpgen_kernels ${MATH_LIB})
  add_dependencies(test_cuda_int8 tpgen_cuda)
  add_test(NAME cuda_int8_ops COMMAND test_cuda_int8)
  set_tests_properties(cuda_int8_ops PROPERTIES LABELS "gpu;int8" SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
# --verbose names the int8 matrices in the memory plan and the path each GEMM takes.
add_test(NAME int8_verbose COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate
         --model ${TPGEN_TEST_DATA}/tiny-f32 --prompt-ids 1,2,3 --max-new-tokens 2 --verbose --backend cpu --threads 1
         --weights int8)
set_tests_properties(int8_verbose PROPERTIES LABELS "int8;mpi" TIMEOUT 90
  PASS_REGULAR_EXPRESSION "weights .*held .*GEMMs int8 \\+ f32 row scales.*cpu int8: matmul -> GEMV")
# info: the GEMM bytes a decode step reads per rank. CodeGen-350M at TP 1: 304,087,040 int8
# elements + 4 bytes for each of 235,520 rows = 290.9 MiB (f32: 1.13 GiB).
add_test(NAME int8_info_bytes COMMAND $<TARGET_FILE:tpgen> info --model ${CMAKE_SOURCE_DIR}/configs/codegen-350M.json
         --weights int8)
set_tests_properties(int8_info_bytes PROPERTIES LABELS "int8" TIMEOUT 30
  PASS_REGULAR_EXPRESSION "in int8 with an f32 scale per row.*per token at batch 1\\): TP 1 290\\.9 MiB, TP 2 ")
# Kernel selection by measurement (int8 and bf16 GEMV): the choice among this CPU's kernels, the
# cache file written, read, a corrupt line and a corrupt file ignored with these warnings,
# TPGEN_CPU_ISA and TPGEN_KERNEL_CACHE=off (tests/cpu_int8/test_kernel_tune.c).
add_executable(test_kernel_tune ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int8/test_kernel_tune.c)
target_link_libraries(test_kernel_tune PRIVATE tpgen_kernels ${MATH_LIB})
add_test(NAME kernel_tune_cache COMMAND ${CMAKE_COMMAND} -E env TPGEN_INT8_ISA= $<TARGET_FILE:test_kernel_tune>
         ${CMAKE_CURRENT_BINARY_DIR}/kernel_tune_scratch)
set_tests_properties(kernel_tune_cache PROPERTIES LABELS "unit;int8;bf16" TIMEOUT 120
  PASS_REGULAR_EXPRESSION "line 2 is not a kernel choice: ignored.*is not a tpgen kernel cache .*ignored, and rewritten.*test_kernel_tune: [0-9]+ checks, 0 failed")
