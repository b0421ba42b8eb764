# Safetensors reader: hand-written valid and malformed files, and a file from the reference writer.
add_executable(test_safetensors ${CMAKE_CURRENT_SOURCE_DIR}/safetensors/test_safetensors.c)
target_link_libraries(test_safetensors PRIVATE tpgen_engine)
add_test(NAME safetensors
         COMMAND test_safetensors ${CMAKE_CURRENT_BINARY_DIR}/safetensors_tmp
                 ${CMAKE_CURRENT_SOURCE_DIR}/safetensors)
set_tests_properties(safetensors PROPERTIES LABELS "loader" TIMEOUT 60)

# libFuzzer target for the header parser (clang only; not run by ctest):
#   build-X/tests/fuzz_safetensors -max_total_time=60 CORPUS_DIR
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_safetensors ${CMAKE_CURRENT_SOURCE_DIR}/safetensors/fuzz_safetensors.c
                 ${CMAKE_SOURCE_DIR}/engine/safetensors.c ${CMAKE_SOURCE_DIR}/util/json.c
                 ${CMAKE_SOURCE_DIR}/util/log.c)
  target_compile_options(fuzz_safetensors PRIVATE -g -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_safetensors PRIVATE -fsanitize=fuzzer,address,undefined)
  set_target_properties(fuzz_safetensors PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
