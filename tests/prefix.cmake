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
# prefix_test(NAME MODE NP MODEL LABELS TIMEOUT [server_deps]): tests/prefix/prefix_test.py MODE
function(prefix_test name mode np model labels timeout)
  add_test(NAME ${name}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/prefix/prefix_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${np} ${model} ${mode})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout})
  if(ARGN)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED ${ARGN})
  endif()
endfunction()
set(PREFIX_TINY ${TPGEN_TEST_DATA}/tiny-f32)
foreach(np 1 2 4)
  prefix_test(prefix_exact_tp${np} exact ${np} ${PREFIX_TINY} "prefix;mpi" 300)
endforeach()
foreach(np 1 2)
  prefix_test(prefix_serve_tp${np} serve ${np} ${PREFIX_TINY} "prefix;server;mpi" 300 server_deps)
  prefix_test(prefix_hits_tp${np} hits ${np} ${PREFIX_TINY} "prefix;server;mpi" 120 server_deps)
endforeach()
# scope: hits scoped per API key, cache_salt, --prefix-cache-scope (issue 34 item 6)
prefix_test(prefix_scope scope 1 ${PREFIX_TINY} "prefix;server" 120 server_deps)
# prefix_ondemand is not labelled server: under ThreadSanitizer (tools/dev/test-sanitize.sh --thread runs
# that label) its 24 requests of up to 500 tokens took over 240 s; the server threads with the
# prefix cache are covered there by prefix_serve_tp*.
prefix_test(prefix_ondemand ondemand 1 ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py prefix 300 server_deps)
