# The guards of docs/EXTENDING.md's recipes (label layering): a step of a recipe missed fails one
# of these, naming it. extending_guards_fail runs each guard on a copy with one step missed.
add_test(NAME extending_arch_fixtures COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/extending/check_arch_fixtures.sh ${CMAKE_SOURCE_DIR})
add_test(NAME extending_tier_twins COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/extending/check_tier_twins.sh ${CMAKE_SOURCE_DIR})
add_test(NAME extending_guards_fail COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/extending/guards_fail.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(extending_arch_fixtures extending_tier_twins extending_guards_fail PROPERTIES LABELS "layering;unit" TIMEOUT 30)
