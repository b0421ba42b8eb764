# Replicas behind HAProxy (label replicas): launcher/tpgen-replicas starts 2 replicas of the tiny
# model and HAProxy with launcher/tpgen-haproxy-cfg's configuration; tests/replicas/replicas_test.py
# says what each mode checks (client affinity, a killed replica, a draining one, --trusted-proxy).
# SKIPPED without haproxy (tools/dev/install-deps.sh installs it).
foreach(mode affinity failover drain trusted)
  add_test(NAME replicas_${mode}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/replicas/replicas_test.py $<TARGET_FILE:tpgen>
                   ${TPGEN_TEST_DATA}/tiny-f32 ${CMAKE_CURRENT_BINARY_DIR}/replicas/${mode} ${mode})
  set_tests_properties(replicas_${mode} PROPERTIES LABELS "replicas;server" TIMEOUT 60 SKIP_RETURN_CODE 77)
endforeach()

# A bad --trusted-proxy fails cleanly, once, on every rank.
tpgen_serve_bad_flags(replicas_bad_flag "replicas;server;errors;mpi"
  "trusted_proxy|--trusted-proxy expects a numeric IPv4 or IPv6 address .*got \"proxy.example\"|--trusted-proxy~proxy.example")

# tools/bench/bench_replicas.sh (affinity against round-robin on the keystroke trace) runs, a killed
# replica losing no request that had not started streaming (the figures: docs/PERFORMANCE.md)
add_test(NAME replicas_bench_smoke COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/replicas/bench_smoke.sh
         ${CMAKE_CURRENT_BINARY_DIR}/keystroke/tiny-demo ${CMAKE_CURRENT_BINARY_DIR}/replicas/bench)
set_tests_properties(replicas_bench_smoke PROPERTIES LABELS "replicas;bench" TIMEOUT 120 SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED "keystroke_model;bench_deps")
