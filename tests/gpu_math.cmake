# gpu_math_on_cpu (label unit): the math shared by the CPU and CUDA backends
# (kernels/common/*.h) compiled as host code and checked against the CPU backend and
# independent references, bit for bit or to 1 ulp (tests/gpu_math/test_gpu_math.c).
add_executable(test_gpu_math ${CMAKE_CURRENT_SOURCE_DIR}/gpu_math/test_gpu_math.c)
target_link_libraries(test_gpu_math PRIVATE tpgen_kernels ${MATH_LIB})
target_compile_options(test_gpu_math PRIVATE -ffp-contract=off)
add_test(NAME gpu_math_on_cpu COMMAND test_gpu_math)
set_tests_properties(gpu_math_on_cpu PROPERTIES LABELS unit TIMEOUT 120)
