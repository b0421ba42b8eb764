# tools/bench/bench_serving.py (label bench): the serving load generator against `tpgen serve` on the
# tiny random model with the CodeGen tokenizer (tests/bench/bench_serving_test.py says what each
# part checks). The setup test installs matplotlib when missing (tools/bench/requirements-bench.txt).
add_test(NAME bench_python_deps COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/ensure_bench_deps.sh)
set_tests_properties(bench_python_deps PROPERTIES LABELS "bench" TIMEOUT 300 FIXTURES_SETUP bench_deps)
foreach(part sweep url errors)
  add_test(NAME bench_serving_${part}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_serving_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                   ${CMAKE_CURRENT_BINARY_DIR}/bench/${part} ${part})
  set_tests_properties(bench_serving_${part} PROPERTIES LABELS "bench" TIMEOUT 60 FIXTURES_REQUIRED bench_deps)
endforeach()
set_tests_properties(bench_serving_sweep PROPERTIES LABELS "bench;mpi")
