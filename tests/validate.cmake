# Request validation (label validate; issue 22): values that change meaning as the float the
# sampler applies, repetition_penalty's range, a model name with a NUL, the exact fit of
# n_positions (server and CLI); padded ids through completion -> detokenize (server and CLI);
# presence/frequency penalties and min_tokens against a Python reference (server and CLI,
# greedy and sampled). tests/server/validate_test.py says what each part checks.
set(VALIDATE_ARGS ${CMAKE_CURRENT_SOURCE_DIR}/server/validate_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC})
foreach(np 1 2)
  foreach(part requests penalties)
    add_test(NAME validate_${part}_tp${np}
             COMMAND python3 ${VALIDATE_ARGS} ${np} ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                     ${CMAKE_CURRENT_BINARY_DIR}/validate/${part}-tp${np} ${part})
    set_tests_properties(validate_${part}_tp${np} PROPERTIES LABELS "validate;server;mpi" TIMEOUT 300
                         FIXTURES_REQUIRED server_deps)
  endforeach()
endforeach()
add_test(NAME validate_detokenize
         COMMAND python3 ${VALIDATE_ARGS} 1 ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                 ${CMAKE_CURRENT_BINARY_DIR}/validate/detokenize detokenize ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py)
set_tests_properties(validate_detokenize PROPERTIES LABELS "validate;server" TIMEOUT 300 FIXTURES_REQUIRED server_deps)
