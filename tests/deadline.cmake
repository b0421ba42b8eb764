# Deadlines and priority (issue 19 part 4; docs/SERVING.md, "Deadlines and priority").
# The scheduler's queue order by (priority, arrival) and tp_sched_end with a reason, driven by hand
# without MPI or a model (labels deadline, sched_unit, unit).
add_executable(test_sched_order ${CMAKE_CURRENT_SOURCE_DIR}/sched_unit/sched_order.c)
target_link_libraries(test_sched_order PRIVATE tpgen_engine ${MATH_LIB})
add_test(NAME sched_order COMMAND test_sched_order)
set_tests_properties(sched_order PROPERTIES LABELS "deadline;sched_unit;unit;engine" TIMEOUT 60)
# The server end to end (labels deadline, server), TP 1, models/codegen-tiny-py (a trained tiny
# model with its tokenizer: real text, and slow enough per token that a budget cuts a generation):
# timeout: a request's budget ends it with finish_reason "timeout" and its partial text (streamed
#   or not), its KV blocks back, one waiting past its budget ends without running,
#   --request-timeout as the default, the 400s of bad budgets, tpgen_requests_timed_out_total;
# priority: --scheduling-policy priority orders the queue, fcfs refuses a non-zero priority.
# tests/server/deadline_test.py says what each part checks.
foreach(part timeout priority)
  add_test(NAME deadline_${part}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/deadline_test.py $<TARGET_FILE:tpgen>
                   ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py ${part})
  set_tests_properties(deadline_${part} PROPERTIES LABELS "deadline;server" TIMEOUT 240)
endforeach()
