# --speculate at the end of a request's KV (label speculate): drafts never fed past the positions
# the request holds, with prompt + max_tokens - 1 on a KV block boundary and one either side;
# greedy ids as without --speculate and the exact drafted / accepted counts of the rule
# (tests/speculate/kv_edge.py, on the trained tiny model: its drafts get accepted).
add_test(NAME speculate_kv_edge
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/speculate/kv_edge.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py)
set_tests_properties(speculate_kv_edge PROPERTIES LABELS "speculate;mpi" TIMEOUT 300)
