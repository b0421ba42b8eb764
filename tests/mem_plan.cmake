# mem_plan (label unit): the memory plan for configs/codegen-16B.json at TP 1/2/4/8, batch 1-64,
# context up to n_positions, against a fake device allocator (tests/mem_plan/test_mem_plan.c).
add_executable(test_mem_plan ${CMAKE_CURRENT_SOURCE_DIR}/mem_plan/test_mem_plan.c)
target_link_libraries(test_mem_plan PRIVATE tpgen_engine tpgen_kernels tpgen_util ${MATH_LIB})
add_test(NAME mem_plan COMMAND test_mem_plan ${CMAKE_SOURCE_DIR}/configs/codegen-16B.json)
set_tests_properties(mem_plan PROPERTIES LABELS unit TIMEOUT 120)
