# Soak (label soak, issue 9 part 5): `tpgen serve` at TP 2 under load on loopback, short version:
# 200 requests (after 200 of warm-up) from 64 clients, 10% disconnecting mid-stream, 5% malformed,
# 5% sent byte by byte, 5% on a 64-token shared prefix closed before their first token (cancelled
# in prefill), 1 template in 8 on that prefix, waves of stalled connections filling --max-connections;
# every answer == the same request alone, stalled connections closed after --conn-timeout, KV blocks
# all free or cached, the cancels counted, prefix-cache hits, no 5xx,
# rank 0's fds back to their start, RSS within +5% (tools/bench/soak_serve.py says what each part checks;
# `python3 tools/bench/soak_serve.py --tpgen build/bin/tpgen --requests 2000` is the long one).
# Under a sanitizer the runtime owns the memory (ASan's quarantine, TSan's shadow and history keep
# growing with the load): RSS is not the server's there, so it is checked in the plain build only.
set(SOAK_RSS)
if(TPGEN_SANITIZE)
  set(SOAK_RSS --rss-limit 0)
endif()
add_test(NAME soak_serve_tp2
         COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/bench/soak_serve.py --tpgen $<TARGET_FILE:tpgen>
                 --mpiexec ${TPGEN_MPIEXEC} --np 2 --requests 200 --time-limit 90
                 --model ${TPGEN_TEST_DATA}/tiny-f32 --tokenizer ${TPGEN_TEST_DATA}/tokenizer/codegen
                 --work ${CMAKE_CURRENT_BINARY_DIR}/soak ${SOAK_RSS})
set_tests_properties(soak_serve_tp2 PROPERTIES LABELS "soak;server;mpi" TIMEOUT 240 RUN_SERIAL TRUE)

# The connection flags the soak relies on: bad values fail cleanly, once, on every rank.
tpgen_serve_bad_flags(soak_bad_flag "soak;server;errors;mpi"
  "conn_timeout|--conn-timeout expects an integer in .0, 86400., got \"-1\"|--conn-timeout~-1"
  "max_connections|--max-connections expects an integer in .1, 65536., got \"0\"|--max-connections~0")

# --conn-timeout counts the client's silence, not the server's own waits: 32 requests queued behind
# --max-batch 1 for longer than a 1 s timeout are all answered; a silent connection is closed.
add_test(NAME soak_conn_timeout
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/reliability/conn_timeout.py $<TARGET_FILE:tpgen>
                 ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(soak_conn_timeout PROPERTIES LABELS "soak;server" TIMEOUT 180)
