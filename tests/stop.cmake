# A graceful stop however it comes (labels faults, server, mpi): Ctrl-C in the terminal of
# `launcher/tpgen-mpirun -np 2 serve` is SIGINT to the whole foreground process group; the
# wrapper must hold the drain (mpirun in a session of its own, the wrapper forwarding SIGUSR1):
# requests in flight finish, or end "abort" after --drain-timeout, and every process exits 0; a
# second signal forces (tests/reliability/stop_group.py says what each case checks; the load is sized
# to the machine by a timed warm-up request, so that the drain lasts seconds on any machine).
foreach(case drain timeout force)
  add_test(NAME faults_serve_group_sigint_${case}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/reliability/stop_group.py $<TARGET_FILE:tpgen>
                   ${CMAKE_SOURCE_DIR}/launcher/tpgen-mpirun ${TPGEN_TEST_DATA}/tiny-f32 ${case})
  set_tests_properties(faults_serve_group_sigint_${case} PROPERTIES LABELS "faults;server;mpi" TIMEOUT 240
                       RUN_SERIAL TRUE)
endforeach()
