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

# The same during `tpgen serve` (tests/reliability/kill_serve.py): a rank SIGKILLed with requests in
# flight ("busy") or while the server waits for requests ("idle": the workers sit in bcast_idle);
# and the ways to stop a server under mpirun that drain it (the requests in flight answered in full,
# every rank and the launcher exit 0): SIGUSR1 to mpirun (forwarded to every rank), SIGTERM to
# launcher/tpgen-mpirun (which turns it into SIGUSR1), and SIGHUP to it (issue 34).
foreach(case "kill_worker_tp2|mpiexec|2|1|busy|" "kill_rank0_tp2|mpiexec|2|0|busy|" "kill_rank0_idle_tp2|mpiexec|2|0|idle|"
             "kill_worker_idle_tp2|mpiexec|2|1|idle|" "kill_worker_tp4|mpiexec|4|3|busy|"
             "usr1_mpirun_drains|mpiexec|2|0|busy|USR1" "term_wrapper_drains|wrapper|2|0|busy|TERM"
             "hup_wrapper_drains|wrapper|2|0|busy|HUP")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 launcher)
  list(GET parts 2 np)
  list(GET parts 3 victim)
  list(GET parts 4 mode)
  list(GET parts 5 sig)
  if(launcher STREQUAL "wrapper")
    set(launcher ${CMAKE_SOURCE_DIR}/launcher/tpgen-mpirun)
  else()
    set(launcher ${TPGEN_MPIEXEC})
  endif()
  add_test(NAME faults_serve_${name}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/reliability/kill_serve.py $<TARGET_FILE:tpgen> ${launcher}
                   ${TPGEN_TEST_DATA}/tiny-f32 ${np} ${victim} ${mode} ${sig})
  set_tests_properties(faults_serve_${name} PROPERTIES LABELS "faults;server;mpi" TIMEOUT 120 RUN_SERIAL TRUE)
endforeach()

# A rank that stops answering (SIGSTOP: alive, so neither MPI nor the launcher notices) mid-request:
# the MPI watchdog (--comm-timeout 1) ends the job within 10 s, naming the all-reduce
# (tests/reliability/stalled_rank.sh; what a lost node does to the ranks left, docs/SLURM.md).
add_test(NAME faults_stalled_rank_tp2
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/reliability/stalled_rank.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(faults_stalled_rank_tp2 PROPERTIES LABELS "faults;server;mpi" TIMEOUT 60 RUN_SERIAL TRUE)
