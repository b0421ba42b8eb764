# gpu_math_on_cpu (label unit): the math shared by the CPU and CUDA backends
# (kernels/common/*.h) compiled as host code and checked against the CPU backend and
# independent references, bit for bit or to 1 ulp (tests/gpu_math/test_gpu_math.c).
add_executable(test_gpu_math ${CMAKE_CURRENT_SOURCE_DIR}/gpu_math/test_gpu_math.c)
target_link_libraries(test_gpu_math PRIVATE tpgen_kernels ${MATH_LIB})
target_compile_options(test_gpu_math PRIVATE -ffp-contract=off)
# clang < 15 converts its __fp16 (the test's half reference there) through compiler-rt's
# __gnu_f2h_ieee/__gnu_h2f_ieee, which libgcc does not have: link compiler-rt's builtins.
if(CMAKE_C_COMPILER_ID STREQUAL "Clang" AND CMAKE_C_COMPILER_VERSION VERSION_LESS 15)
  execute_process(COMMAND ${CMAKE_C_COMPILER} --rtlib=compiler-rt -print-libgcc-file-name
                  OUTPUT_VARIABLE CLANG_RT_BUILTINS OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT EXISTS "${CLANG_RT_BUILTINS}")
    message(FATAL_ERROR "clang ${CMAKE_C_COMPILER_VERSION}: compiler-rt builtins not found (${CLANG_RT_BUILTINS}); "
                        "test_gpu_math needs them for __fp16 (install libclang-rt-dev or use clang >= 15)")
  endif()
  target_link_libraries(test_gpu_math PRIVATE ${CLANG_RT_BUILTINS})
endif()
add_test(NAME gpu_math_on_cpu COMMAND test_gpu_math)
set_tests_properties(gpu_math_on_cpu PROPERTIES LABELS unit TIMEOUT 120)
