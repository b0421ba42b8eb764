# A client that leaves (label server): its request is cancelled between engine steps even before
# any byte of the answer is written, streamed or not (launcher/server/conns.c, srv_conns_sweep), and a
# keep-alive connection with a pipelined request is not taken for a client that left
# (tests/server/gone_test.py says what each part checks). TP 1: all of it happens on rank 0.
foreach(part stream plain keepalive)
  add_test(NAME server_gone_${part}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/gone_test.py $<TARGET_FILE:tpgen>
                   ${TPGEN_TEST_DATA}/tiny-f32 ${part})
  set_tests_properties(server_gone_${part} PROPERTIES LABELS "server" TIMEOUT 120)
endforeach()
