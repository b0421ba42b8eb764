# Engine core (label engine): the scheduler's limits end to end, and how a rank failing alone is
# reported.
add_test(NAME engine_generate_limits
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sched_limits/limits.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(engine_generate_limits PROPERTIES LABELS "engine;mpi" TIMEOUT 120)

add_executable(die_all_alone ${CMAKE_CURRENT_SOURCE_DIR}/sched_limits/die_all_alone.c)
target_link_libraries(die_all_alone PRIVATE tpgen_comm)
add_test(NAME engine_die_all_alone
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh --abort-ok
                 "\\[rank 1\\] error: only rank 1 saw this error"
                 ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:die_all_alone>)
set_tests_properties(engine_die_all_alone PROPERTIES LABELS "engine;mpi" TIMEOUT 90
                     ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
