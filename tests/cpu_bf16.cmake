# The CPU backend's bf16 path (label bf16): op tests against a double reference, each GEMV ISA
# and each batched-GEMM path forced in turn (SKIPPED where this CPU or build lacks it), and HF
# parity against HF transformers run in bf16 (tools/make_bf16_reference.py) at TP 1 and 2.
add_executable(test_bf16_ops ${CMAKE_CURRENT_SOURCE_DIR}/cpu_bf16/test_bf16_ops.c)
target_link_libraries(test_bf16_ops PRIVATE tpgen_kernels ${MATH_LIB})
foreach(isa c avx2 avx512bf16)
  foreach(gemm blas dnnl)
    add_test(NAME bf16_ops_${isa}_${gemm} COMMAND test_bf16_ops 2 ${isa} ${gemm})
    set_tests_properties(bf16_ops_${isa}_${gemm} PROPERTIES LABELS "unit;bf16" SKIP_RETURN_CODE 77 TIMEOUT 120)
  endforeach()
endforeach()
add_test(NAME bf16_ops_3threads COMMAND test_bf16_ops 3 c blas)
set_tests_properties(bf16_ops_3threads PROPERTIES LABELS "unit;bf16" SKIP_RETURN_CODE 77 TIMEOUT 120)
