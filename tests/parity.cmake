# HF parity of the whole engine (label parity): every fixture at TP = 1, 2, 4 on the CPU
# backend; a TP size the fixture's n_head does not allow reports SKIPPED.
add_executable(check_parity ${CMAKE_CURRENT_SOURCE_DIR}/parity/check_parity.c)
target_link_libraries(check_parity PRIVATE tpgen_util)
tpgen_parity_fixtures(PARITY_FIXTURES)
foreach(fixture ${PARITY_FIXTURES})
  get_filename_component(name ${fixture} NAME)
  foreach(np 1 2 4)
    add_test(NAME parity_${name}_tp${np}
             COMMAND check_parity --tpgen $<TARGET_FILE:tpgen> --np ${np} --mpiexec ${TPGEN_MPIEXEC}
                     --fixture ${fixture} -- --backend cpu --threads 1)
    set_tests_properties(parity_${name}_tp${np} PROPERTIES LABELS "parity;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300)
  endforeach()
endforeach()
