# Automatic prefix caching and KV on demand with preemption, end to end (label prefix;
# tests/prefix/prefix_test.py says what each mode checks; the scheduler's own cases are in
# tests/sched_unit):
#  - exact: `tpgen generate` greedy ids identical to a TP 1 --no-prefix-cache baseline with the
#    cache on, and in a KV pool so small that there are more preemptions than requests (a
#    storm) with the cache on, off and with --speculate, at TP 1, 2 and 4;
#  - serve: the same storm through `tpgen serve` at TP 1 and 2 (ids, tpgen_preemptions_total,
#    the prefix-cache counters, usage.prompt_tokens_details.cached_tokens on a repeated prompt,
#    0 with --no-prefix-cache, free + cached == total blocks at idle);
#  - hits: exact cached_tokens and prefix-cache counters for scripted sequences through `tpgen
#    serve` at TP 1 and 2 (an eviction after a finished prefix, a resume after a preemption;
#    issue 34's mutants: blocks released first to last, a resume counted again);
#  - ondemand: short code answers with max_tokens 500 in a 1,024-token pool run >= 6x more at
#    once than reserving prompt + max_tokens would allow.
foreach(np 1 2 4)
  add_test(NAME prefix_exact_tp${np}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/prefix/prefix_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${np} ${TPGEN_TEST_DATA}/tiny-f32 exact)
  set_tests_properties(prefix_exact_tp${np} PROPERTIES LABELS "prefix;mpi" TIMEOUT 300)
endforeach()
foreach(np 1 2)
  add_test(NAME prefix_serve_tp${np}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/prefix/prefix_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${np} ${TPGEN_TEST_DATA}/tiny-f32 serve)
  set_tests_properties(prefix_serve_tp${np} PROPERTIES LABELS "prefix;server;mpi" TIMEOUT 300
                       FIXTURES_REQUIRED server_deps)
endforeach()
foreach(np 1 2)
  add_test(NAME prefix_hits_tp${np}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/prefix/prefix_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${np} ${TPGEN_TEST_DATA}/tiny-f32 hits)
  set_tests_properties(prefix_hits_tp${np} PROPERTIES LABELS "prefix;server;mpi" TIMEOUT 120
                       FIXTURES_REQUIRED server_deps)
endforeach()
# scope: hits scoped per API key, cache_salt, --prefix-cache-scope (issue 34 item 6)
add_test(NAME prefix_scope
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/prefix/prefix_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                 ${TPGEN_TEST_DATA}/tiny-f32 scope)
set_tests_properties(prefix_scope PROPERTIES LABELS "prefix;server" TIMEOUT 120 FIXTURES_REQUIRED server_deps)
# prefix_ondemand is not labelled server: under ThreadSanitizer (tools/test-sanitize.sh --thread runs
# that label) its 24 requests of up to 500 tokens took over 240 s; the server threads with the
# prefix cache are covered there by prefix_serve_tp*.
add_test(NAME prefix_ondemand
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/prefix/prefix_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                 ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py ondemand)
set_tests_properties(prefix_ondemand PROPERTIES LABELS "prefix" TIMEOUT 300 FIXTURES_REQUIRED server_deps)
