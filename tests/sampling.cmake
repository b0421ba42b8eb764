# Sampling (label sampling): the sampler against double references (unit), and seeded sampled
# generation through `tpgen generate` across TP sizes (mpi).
add_executable(test_sampler ${CMAKE_CURRENT_SOURCE_DIR}/sampling/test_sampler.c)
target_link_libraries(test_sampler PRIVATE tpgen_engine ${MATH_LIB})
add_test(NAME sampler COMMAND test_sampler)
set_tests_properties(sampler PROPERTIES LABELS "sampling;unit" TIMEOUT 60)
