# The shipped tiny model models/codegen-tiny-py (label tiny): HF parity at TP = 1, 2, 4 with its
# expected.json (tools/fixtures/make_tiny_fixture.py), and the demo's completion at TP = 2.
set(TPGEN_TINY_MODEL ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py)
foreach(np 1 2 4)
  add_test(NAME parity_codegen-tiny-py_tp${np}
           COMMAND check_parity --tpgen $<TARGET_FILE:tpgen> --np ${np} --mpiexec ${TPGEN_MPIEXEC}
                   --fixture ${TPGEN_TINY_MODEL} -- --backend cpu --threads 1)
  set_tests_properties(parity_codegen-tiny-py_tp${np} PROPERTIES LABELS "parity;mpi;tiny"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
add_test(NAME tiny_demo_completion
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tiny/demo_check.sh $<TARGET_FILE:tpgen>)
set_tests_properties(tiny_demo_completion PROPERTIES LABELS "tiny;mpi;launcher" TIMEOUT 300)
