# The CPU backend's bf16 path (label bf16): op tests against a double reference and HF/torch's own bf16
# bits (tests/data/bf16_ops, tools/fixtures/make.py bf16-ops), each GEMV ISA
# and each batched-GEMM path forced in turn (SKIPPED where this CPU or build lacks it), and HF
# parity against HF transformers run in bf16 (tools/fixtures/make.py codegen --bf16-only) at TP 1 and 2.
add_executable(test_bf16_ops ${CMAKE_CURRENT_SOURCE_DIR}/cpu_bf16/test_bf16_ops.c)
target_link_libraries(test_bf16_ops PRIVATE tpgen_kernels ${MATH_LIB})
foreach(isa c avx2 avx512bf16)
  foreach(gemm blas dnnl fma)
    add_test(NAME bf16_ops_${isa}_${gemm} COMMAND test_bf16_ops 2 ${isa} ${gemm} ${TPGEN_TEST_DATA}/bf16_ops/hf_ops.txt)
    set_tests_properties(bf16_ops_${isa}_${gemm} PROPERTIES LABELS "unit;bf16" SKIP_RETURN_CODE 77 TIMEOUT 120)
  endforeach()
endforeach()
add_test(NAME bf16_ops_3threads COMMAND test_bf16_ops 3 c blas ${TPGEN_TEST_DATA}/bf16_ops/hf_ops.txt)
set_tests_properties(bf16_ops_3threads PROPERTIES LABELS "unit;bf16" SKIP_RETURN_CODE 77 TIMEOUT 120)
foreach(np 1 2)
  foreach(ref hf-bf16 hf-f32)
    add_test(NAME parity_cpu_bf16_${ref}_tp${np}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/parity/hf_parity.sh --backend cpu --dtype bf16 --threads 1 --np ${np}
                     --ref ${ref} --tol 0.08 --mean-tol 0.02 --timeout 120 --build ${CMAKE_BINARY_DIR})
    set_tests_properties(parity_cpu_bf16_${ref}_tp${np} PROPERTIES LABELS "parity;mpi;bf16" TIMEOUT 300)
  endforeach()
endforeach()
# Bad input (label errors), through tests/errors/expect_error.sh: a clear message, once, non-zero.
set(BF16_ERR bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh)
set(BF16_RUN ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate --model ${TPGEN_TEST_DATA}/tiny-f32
    --prompt-ids 1,2 --max-new-tokens 2 --backend cpu --threads 1)
# (--dtype f16 on the CPU: errors_dtype_on_cpu in tests/errors.cmake)
add_test(NAME errors_cpu_bf16_isa COMMAND ${BF16_ERR} "TPGEN_CPU_ISA=sse9: expected amx, avx512, avxvnni, avx2 or c"
         ${BF16_RUN} --dtype bf16)
set_tests_properties(errors_cpu_bf16_isa PROPERTIES ENVIRONMENT "TPGEN_CPU_ISA=sse9;OMPI_MCA_odls_base_sigkill_timeout=0")
add_test(NAME errors_cpu_bf16_gemm COMMAND ${BF16_ERR} "TPGEN_CPU_GEMM=fast: expected dnnl, fma or blas"
         ${BF16_RUN} --dtype bf16)
set_tests_properties(errors_cpu_bf16_gemm PROPERTIES ENVIRONMENT "TPGEN_CPU_GEMM=fast;OMPI_MCA_odls_base_sigkill_timeout=0")
set(bf16_err_tests errors_cpu_bf16_isa errors_cpu_bf16_gemm)
if(NOT (DNNL_INCLUDE_DIR AND DNNL_LIBRARY) OR TPGEN_DNNL STREQUAL "OFF")
  add_test(NAME errors_cpu_bf16_no_onednn COMMAND ${BF16_ERR} "--dtype bf16 on the CPU needs oneDNN" ${BF16_RUN} --dtype bf16)
  list(APPEND bf16_err_tests errors_cpu_bf16_no_onednn)
endif()
set_tests_properties(${bf16_err_tests} PROPERTIES LABELS "errors;mpi;bf16" TIMEOUT 90)
# GEMM rates f32 vs bf16 vs oneDNN's own bf16 matmul (built, not a test; docs/PERFORMANCE.md)
add_executable(bench_bf16_gemm ${CMAKE_CURRENT_SOURCE_DIR}/cpu_bf16/bench_bf16_gemm.c)
target_link_libraries(bench_bf16_gemm PRIVATE tpgen_kernels ${MATH_LIB})
