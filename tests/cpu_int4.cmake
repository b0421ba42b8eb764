# int4 weights on the CPU (--weights int4, label cpu_int4; kernels/cpu/cpu_int4.c): per tier and path,
# the kernels against the plain-C twin bit for bit and the twin against a double reference of the
# dequantized weights (SKIPPED where this CPU lacks the tier); RTN, the packed layout, the int8
# lm_head through the int4 backend; bad group sizes and a matrix of another shape (label errors).
add_executable(test_int4_ops ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int4/test_int4_ops.c)
target_link_libraries(test_int4_ops PRIVATE tpgen_kernels ${MATH_LIB})
# _a8: the same with 8-bit activations (--int4-activations int8), the twin's too
foreach(isa c avx2 avxvnni avx512 amx)
  foreach(path gemv gemm)
    add_test(NAME int4_ops_${isa}_${path} COMMAND test_int4_ops 2 ${isa} ${path})
    add_test(NAME int4_ops_${isa}_${path}_a8 COMMAND test_int4_ops 2 ${isa} ${path} a8)
    set_tests_properties(int4_ops_${isa}_${path} int4_ops_${isa}_${path}_a8 PROPERTIES LABELS "unit;cpu_int4"
                         SKIP_RETURN_CODE 77 TIMEOUT 120 ENVIRONMENT "TPGEN_KERNEL_CACHE=off")
  endforeach()
endforeach()
# as in a job: the tiers measured per shape (TPGEN_CPU_ISA unset), the GEMV up to 12 tokens and the
# GEMM above, 3 threads (uneven panel ranges)
add_test(NAME int4_ops_auto_3threads COMMAND test_int4_ops 3 auto auto)
add_test(NAME int4_ops_auto_3threads_a8 COMMAND test_int4_ops 3 auto auto a8)
set_tests_properties(int4_ops_auto_3threads int4_ops_auto_3threads_a8 PROPERTIES LABELS "unit;cpu_int4"
                     SKIP_RETURN_CODE 77 TIMEOUT 120 ENVIRONMENT "TPGEN_KERNEL_CACHE=off")
# Bad input: a clear message naming the shape, once, non-zero (tests/errors/expect_error.sh).
set(INT4_ERR bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh)
add_test(NAME errors_int4_group_not_dividing COMMAND ${INT4_ERR}
         "matrix_bytes_q4 of an int4 matrix \\[64 x 1000\\] with group 128: the group must divide K = 1000"
         $<TARGET_FILE:test_int4_ops> bad bytes 64 1000 128)
add_test(NAME errors_int4_group_unaligned COMMAND ${INT4_ERR}
         "matrix_fill_random_q4 of an int4 matrix \\[64 x 960\\] with group 48: .* multiple of 32"
         $<TARGET_FILE:test_int4_ops> bad fill 64 960 48)
add_test(NAME errors_int4_group_zero COMMAND ${INT4_ERR} "matrix_bytes_q4 of an int4 matrix \\[8 x 256\\] with group 0"
         $<TARGET_FILE:test_int4_ops> bad bytes 8 256 0)
add_test(NAME errors_int4_matmul_shape COMMAND ${INT4_ERR} "matmul of \\[20 x 256\\] on a matrix stored as \\[20 x 320\\]"
         $<TARGET_FILE:test_int4_ops> bad shape 20 256 64)
set_tests_properties(errors_int4_group_not_dividing errors_int4_group_unaligned errors_int4_group_zero
                     errors_int4_matmul_shape PROPERTIES LABELS "errors;cpu_int4" TIMEOUT 60)
# GEMM rates int8 vs int4 (GEMV and GEMM) on CodeGen shapes (built, not a test)
add_executable(bench_int4_gemm ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int4/bench_int4_gemm.c)
target_link_libraries(bench_int4_gemm PRIVATE tpgen_kernels ${MATH_LIB})
