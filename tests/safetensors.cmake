# Safetensors reader: hand-written valid and malformed files, and a file from the reference writer.
add_executable(test_safetensors ${CMAKE_CURRENT_SOURCE_DIR}/safetensors/test_safetensors.c)
target_link_libraries(test_safetensors PRIVATE tpgen_checkpoint)
add_test(NAME safetensors
         COMMAND test_safetensors ${CMAKE_CURRENT_BINARY_DIR}/safetensors_tmp
                 ${CMAKE_CURRENT_SOURCE_DIR}/safetensors)
set_tests_properties(safetensors PROPERTIES LABELS "loader" TIMEOUT 60)

# Its libFuzzer target is tests/fuzz/fuzz_safetensors.c (tests/fuzz.cmake).
