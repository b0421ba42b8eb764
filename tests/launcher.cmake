# The tpgen program end to end (label launcher): text prompts through the tokenizer, --stop,
# plain output, and the bench command.
add_test(NAME launcher_text_stop_bench
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launcher/text_and_bench.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen ${CMAKE_CURRENT_BINARY_DIR}/launcher)
set_tests_properties(launcher_text_stop_bench PROPERTIES LABELS "launcher;mpi" TIMEOUT 120)
