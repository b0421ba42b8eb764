# The keystroke benchmark: tools/bench/bench_serving.py --dataset completion-trace (label bench;
# tests/bench/keystroke_test.py says what each part checks). The model: configs/tiny-demo.json
# (the CodeGen vocabulary and 2,048 positions, so real source files tokenize into it), written by
# tools/fixtures/make_random_model.py with the CodeGen tokenizer.
set(_ks_model ${CMAKE_CURRENT_BINARY_DIR}/keystroke/tiny-demo)
add_test(NAME keystroke_model
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tools/fixtures/make_random_model.py ${CMAKE_SOURCE_DIR}/configs/tiny-demo.json
                 ${_ks_model} --dtype f32 --seed 7 --tokenizer ${TPGEN_TEST_DATA}/tokenizer/codegen)
set_tests_properties(keystroke_model PROPERTIES LABELS "bench" TIMEOUT 120 FIXTURES_SETUP keystroke_model)
foreach(part unit trace seed errors)
  add_test(NAME bench_serving_keystroke_${part}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/bench/keystroke_test.py $<TARGET_FILE:tpgen> ${_ks_model}
                   ${CMAKE_CURRENT_BINARY_DIR}/keystroke/${part} ${part})
  set_tests_properties(bench_serving_keystroke_${part} PROPERTIES LABELS "bench" TIMEOUT 240)
endforeach()
set_tests_properties(bench_serving_keystroke_trace bench_serving_keystroke_seed PROPERTIES
                     FIXTURES_REQUIRED "keystroke_model;bench_deps")
