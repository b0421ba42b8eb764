# Bounded failure (label faults): a rank SIGKILLed in the middle of `tpgen generate` ends the
# whole job within 10 s, and the lost rank is named (tests/reliability/kill_rank.sh).
foreach(case "worker|2|1" "rank0|2|0" "worker|4|3")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 who)
  list(GET parts 1 np)
  list(GET parts 2 victim)
  add_test(NAME faults_kill_${who}_tp${np}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/reliability/kill_rank.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${TPGEN_TEST_DATA}/tiny-f32 ${np} ${victim})
  set_tests_properties(faults_kill_${who}_tp${np} PROPERTIES LABELS "faults;mpi" TIMEOUT 90 RUN_SERIAL TRUE)
endforeach()
