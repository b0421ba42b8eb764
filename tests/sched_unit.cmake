# The scheduler's plan and update halves with fabricated step outputs: no MPI, no model
# (label unit, engine).
add_executable(test_sched_unit ${CMAKE_CURRENT_SOURCE_DIR}/sched_unit/sched_unit.c)
target_link_libraries(test_sched_unit PRIVATE tpgen_sched ${MATH_LIB})
add_test(NAME sched_unit COMMAND test_sched_unit)
set_tests_properties(sched_unit PROPERTIES LABELS "unit;engine" TIMEOUT 60)
