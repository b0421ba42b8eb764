# Prompt scoring in the scheduler's steps (label server; tests/server/scoring_test.py says what
# each part checks): echo + logprobs values == `tpgen score` at TP 1 and 2 (chunked prompts,
# full-logits steps, streamed), a stream's pace while many prompts are scored, and a KV cache
# just too small / just large enough for an echo + logprobs request (400 at once / served).
foreach(np 1 2)
  add_test(NAME scoring_values_tp${np}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/scoring_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${np} ${TPGEN_TEST_DATA}/tiny-f32 ${CMAKE_CURRENT_BINARY_DIR}/scoring/values-tp${np} values)
  set_tests_properties(scoring_values_tp${np} PROPERTIES LABELS "server;mpi" TIMEOUT 180
                       FIXTURES_REQUIRED server_deps)
endforeach()
add_test(NAME scoring_fairness
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/scoring_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                 ${TPGEN_TEST_DATA}/tiny-f32 ${CMAKE_CURRENT_BINARY_DIR}/scoring/fairness fairness)
set_tests_properties(scoring_fairness PROPERTIES LABELS "server" TIMEOUT 300 FIXTURES_REQUIRED server_deps)
add_test(NAME scoring_kv_limit
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/scoring_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                 ${TPGEN_TEST_DATA}/tiny-f32 ${CMAKE_CURRENT_BINARY_DIR}/scoring/kv kv)
set_tests_properties(scoring_kv_limit PROPERTIES LABELS "server" TIMEOUT 120 FIXTURES_REQUIRED server_deps)
