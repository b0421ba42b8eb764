# tpgen serve (label server): the OpenAI-compatible server end to end with the real `openai`
# client and curl, at TP 1 and 2 (tests/server/serve_test.py says what each part checks). The
# setup test installs the Python client when it is missing (tools/dev/requirements-test.txt).
add_test(NAME server_python_deps COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/server/ensure_python_deps.sh)
set_tests_properties(server_python_deps PROPERTIES LABELS "server" TIMEOUT 300 FIXTURES_SETUP server_deps)
foreach(np 1 2)
  add_test(NAME server_api_tp${np}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/serve_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${np}
                   ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                   ${CMAKE_CURRENT_BINARY_DIR}/server/api-tp${np} api)
  set_tests_properties(server_api_tp${np} PROPERTIES LABELS "server;mpi" TIMEOUT 180 FIXTURES_REQUIRED server_deps)
endforeach()
add_test(NAME server_limits
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/serve_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                 ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                 ${CMAKE_CURRENT_BINARY_DIR}/server/limits limits)
set_tests_properties(server_limits PROPERTIES LABELS "server" TIMEOUT 120 FIXTURES_REQUIRED server_deps)

# Bad serve flags fail cleanly, once, on every rank (tests/errors/expect_error.sh).
tpgen_serve_bad_flags(server_bad_flag "server;errors;mpi"
  "port|--port expects an integer in .0, 65535., got \"70000\"|--port~70000"
  "queue|--max-queue expects an integer in .1, .*got \"0\"|--max-queue~0"
  "drain|--drain-timeout expects a number in .0, 86400., got \"-1\"|--drain-timeout~-1"
  "generate_flag|unknown flag --max-new-tokens for `tpgen serve`|--max-new-tokens~5")

# The Slurm job that serves (launcher/tpgen-serve.sbatch), on the test cluster of tests/slurm.cmake
# when it can run (root, slurm-wlm and munge); otherwise SKIPPED, as the slurm tests are.
find_program(TPGEN_SERVE_SLURMCTLD slurmctld PATHS /usr/sbin /sbin)
find_program(TPGEN_SERVE_SBATCH sbatch)
execute_process(COMMAND id -u OUTPUT_VARIABLE TPGEN_SERVE_UID OUTPUT_STRIP_TRAILING_WHITESPACE)
if(TPGEN_SERVE_SLURMCTLD AND TPGEN_SERVE_SBATCH AND TPGEN_SERVE_UID STREQUAL "0")
  add_test(NAME server_slurm_sbatch
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/server/slurm_serve.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                   ${CMAKE_CURRENT_BINARY_DIR}/server/slurm)
  set_tests_properties(server_slurm_sbatch PROPERTIES LABELS "server;slurm;mpi" TIMEOUT 150
                       FIXTURES_REQUIRED slurm_cluster RESOURCE_LOCK slurm_cluster
                       ENVIRONMENT "SLURM_CONF=${CMAKE_CURRENT_BINARY_DIR}/slurm-cluster/etc/slurm.conf")
else()
  add_test(NAME server_slurm_sbatch COMMAND sh -c "echo 'SKIPPED: needs root and slurm-wlm + munge'; exit 77")
  set_tests_properties(server_slurm_sbatch PROPERTIES LABELS "server;slurm" SKIP_RETURN_CODE 77)
endif()

# One table of request knobs (engine/sched/request_params.h) drives the server's parser, `tpgen generate`'s
# flags and tp_request_params_validate (issue 32 item 4): the table is well formed and agrees with
# the defaults and the checks (test_request_params); every knob's bad values get the same message
# from the server and from the CLI, only the name differing (params_test.py).
add_executable(test_request_params ${CMAKE_CURRENT_SOURCE_DIR}/server/test_request_params.c)
target_link_libraries(test_request_params tpgen_sched)
add_test(NAME server_params_table COMMAND test_request_params)
set_tests_properties(server_params_table PROPERTIES LABELS "server;unit" TIMEOUT 30)
add_test(NAME server_params_same_answer
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/params_test.py $<TARGET_FILE:tpgen>
                 $<TARGET_FILE:test_request_params> ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(server_params_same_answer PROPERTIES LABELS "server;errors" TIMEOUT 120
                     FIXTURES_REQUIRED server_deps)
