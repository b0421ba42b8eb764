# docs/PERFORMANCE.md's tables against the runs in docs/bench/*.jsonl (label docs): every
# <!-- perf_tables --> block must equal what tools/bench/perf_tables.py renders from the data, so the
# figures cannot drift from their records; and the record/render tools themselves (label unit).
add_test(NAME perf_tables_docs
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tools/bench/perf_tables.py --check ${CMAKE_SOURCE_DIR}/docs/PERFORMANCE.md)
set_tests_properties(perf_tables_docs PROPERTIES LABELS "docs;unit" TIMEOUT 60)
add_test(NAME perf_tables_unit COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/perf_docs/perf_tables_test.py)
set_tests_properties(perf_tables_unit PROPERTIES LABELS "docs;unit" TIMEOUT 60)
