# Deadlines and priority (issue 19 part 4; docs/SERVING.md, "Deadlines and priority").
# The scheduler's queue order by (priority, arrival) and tp_sched_end with a reason, driven by hand
# without MPI or a model (labels deadline, sched_unit, unit).
add_executable(test_sched_order ${CMAKE_CURRENT_SOURCE_DIR}/sched_unit/sched_order.c)
target_link_libraries(test_sched_order PRIVATE tpgen_sched ${MATH_LIB})
add_test(NAME sched_order COMMAND test_sched_order)
set_tests_properties(sched_order PROPERTIES LABELS "deadline;sched_unit;unit;engine" TIMEOUT 60)
# The server end to end (labels deadline, server), TP 1, models/codegen-tiny-py (a trained tiny
# model with its tokenizer: real text, and slow enough per token that a budget cuts a generation):
# timeout: a request's budget ends it with finish_reason "timeout" and its partial text (streamed
#   or not), its KV blocks back, one waiting past its budget ends without running,
#   --request-timeout as the default, the 400s of bad budgets, tpgen_requests_timed_out_total;
# priority: --scheduling-policy priority orders the queue, fcfs refuses a non-zero priority;
# preempt: under KV pressure an urgent request is neither the victim nor queued behind the
#   preempted (issue 34 item 5).
# tests/server/deadline_test.py says what each part checks.
foreach(part timeout priority preempt)
  add_test(NAME deadline_${part}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/deadline_test.py $<TARGET_FILE:tpgen>
                   ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py ${part})
  set_tests_properties(deadline_${part} PROPERTIES LABELS "deadline;server" TIMEOUT 240)
endforeach()
# The two flags: a bad value fails cleanly, once, on every rank (TP 2).
foreach(case "request_timeout;--request-timeout expects a number in .0, 1e.09., got \"nan\";--request-timeout;nan"
             "request_timeout_neg;--request-timeout expects a number in .0, 1e.09., got \"-1\";--request-timeout;-1"
             "policy;--scheduling-policy must be fcfs or priority, got \"lifo\";--scheduling-policy;lifo")
  list(GET case 0 name)
  list(GET case 1 want)
  list(GET case 2 flag)
  list(GET case 3 value)
  add_test(NAME deadline_bad_flag_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh "${want}" ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS}
                   -np 2 $<TARGET_FILE:tpgen> serve --model ${TPGEN_TEST_DATA}/tiny-f32 --backend cpu --threads 1
                   ${flag} ${value})
  set_tests_properties(deadline_bad_flag_${name} PROPERTIES LABELS "deadline;server;errors;mpi" TIMEOUT 60
                       ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
endforeach()
