# int8 weights (--weights int8, label int8): op tests of the CPU kernels against a double
# reference of the dequantized weights, each GEMV ISA and each GEMM path forced in turn
# (SKIPPED where this CPU lacks the ISA); end to end on the fixtures and the tiny model against
# the f32 run (tests/cpu_int8/parity_int8.sh) at TP 1 and 2; bad input (label errors).
add_executable(test_int8_ops ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int8/test_int8_ops.c)
target_link_libraries(test_int8_ops PRIVATE tpgen_kernels ${MATH_LIB})
foreach(isa c avx2)
  foreach(gemm gemv blas auto)
    add_test(NAME int8_ops_${isa}_${gemm} COMMAND test_int8_ops 2 ${isa} ${gemm})
    set_tests_properties(int8_ops_${isa}_${gemm} PROPERTIES LABELS "unit;int8" SKIP_RETURN_CODE 77 TIMEOUT 120)
  endforeach()
endforeach()
add_test(NAME int8_ops_3threads COMMAND test_int8_ops 3 avx2 auto)
set_tests_properties(int8_ops_3threads PROPERTIES LABELS "unit;int8" SKIP_RETURN_CODE 77 TIMEOUT 120)
