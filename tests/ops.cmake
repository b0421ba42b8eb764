# Op tests of the CPU backend (label unit) and its micro-benchmark (built, not a test).
# They link only tpgen_kernels (which brings tpgen_util), so they build while the rest of the
# engine is in progress.
add_executable(test_cpu_ops ${CMAKE_CURRENT_SOURCE_DIR}/ops/test_cpu_ops.c)
target_link_libraries(test_cpu_ops PRIVATE tpgen_kernels ${MATH_LIB})
add_test(NAME cpu_ops COMMAND test_cpu_ops 2)
# 3 threads: uneven GEMM slices and attention head groups
add_test(NAME cpu_ops_3threads COMMAND test_cpu_ops 3)
set_tests_properties(cpu_ops cpu_ops_3threads PROPERTIES LABELS unit TIMEOUT 120)

add_executable(bench_cpu_ops ${CMAKE_CURRENT_SOURCE_DIR}/ops/bench_cpu_ops.c)
target_link_libraries(bench_cpu_ops PRIVATE tpgen_kernels ${MATH_LIB})
# decode attention against context, L layers' caches a step (docs/PERFORMANCE.md; built, not a test)
add_executable(bench_attention ${CMAKE_CURRENT_SOURCE_DIR}/ops/bench_attention.c)
target_link_libraries(bench_attention PRIVATE tpgen_kernels ${MATH_LIB})
