# tpgen serve at the byte level (label server): HTTP framing on raw sockets, rank 0's peak RSS per
# costly request kind, slow headers under --conn-timeout, fairness between clients
# (tests/server/http_test.py says what each part checks). TP 1: all of it happens on rank 0.
foreach(part framing memory loris fair detok slowbody keepalive)
  add_test(NAME server_http_${part}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/http_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                   ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen
                   ${CMAKE_CURRENT_BINARY_DIR}/server/http-${part} ${part})
  set_tests_properties(server_http_${part} PROPERTIES LABELS "server" TIMEOUT 120 FIXTURES_REQUIRED server_deps)
  if(TPGEN_SANITIZE) # the runtime owns the memory there: RSS bounds are for the plain build
    set_tests_properties(server_http_${part} PROPERTIES ENVIRONMENT TPGEN_SANITIZED=1)
  endif()
endforeach()

# --max-seqs-per-client: a bad value fails cleanly, once, on every rank.
add_test(NAME server_bad_flag_max_seqs_per_client
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh
                 "--max-seqs-per-client expects an integer in .1, 1048576., got \"0\"" ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS}
                 -np 2 $<TARGET_FILE:tpgen> serve --model ${TPGEN_TEST_DATA}/tiny-f32 --backend cpu --threads 1
                 --max-seqs-per-client 0)
set_tests_properties(server_bad_flag_max_seqs_per_client PROPERTIES LABELS "server;errors;mpi" TIMEOUT 60
                     ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
