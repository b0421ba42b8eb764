# A choice that ends on EOS keeps the text its stop matcher held back (label server): TP 1, the
# tiny model with the CodeGen tokenizer (tests/server/eos_stop_test.py).
add_test(NAME server_eos_stop
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/eos_stop_test.py $<TARGET_FILE:tpgen>
                 ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen)
set_tests_properties(server_eos_stop PROPERTIES LABELS server TIMEOUT 120
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
