# kernels/cpu/cpu_split.c, the GEMVs' work split (label unit): every panel exactly once, with
# threads slowed at random so that ranges are stolen from.
add_executable(test_cpu_split ${CMAKE_CURRENT_SOURCE_DIR}/cpu_split/test_cpu_split.c)
target_link_libraries(test_cpu_split PRIVATE tpgen_kernels)
add_test(NAME cpu_split COMMAND test_cpu_split)
set_tests_properties(cpu_split PROPERTIES LABELS "unit" TIMEOUT 60)
