# tests/common/serve_harness.py, the harness every serve driver starts and stops its servers with
# (label server): what it reports checked against real servers at TP 1 (direct) and TP 2 (under
# mpiexec and under launcher/tpgen-mpirun), and its failures (tests/common/serve_harness_test.py).
add_test(NAME server_harness
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/common/serve_harness_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${CMAKE_SOURCE_DIR}/launcher/tpgen-mpirun ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(server_harness PROPERTIES LABELS "server;mpi" TIMEOUT 120)
