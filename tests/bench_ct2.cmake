# tools/bench/bench_vs_ct2.py (issue 21's tpgen vs CTranslate2 table) on a tiny random model, label
# bench: ids agreement and the table's shape, no timing. SKIPPED where ctranslate2, torch or
# transformers cannot be imported (CI installs none of them: CTranslate2's wheel is ~42 MB and its
# converter needs torch).
add_test(NAME bench_vs_ct2_smoke
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/ct2_smoke.sh $<TARGET_FILE:tpgen>
                 ${CMAKE_CURRENT_BINARY_DIR}/bench_vs_ct2)
set_tests_properties(bench_vs_ct2_smoke PROPERTIES LABELS "bench;mpi" TIMEOUT 900 SKIP_RETURN_CODE 77)
# tools/bench/ct2_compat.py (the converter's dtype keyword against the installed transformers, issue 35)
# on its own: stdlib only, so it runs everywhere, CI included, without ctranslate2.
add_test(NAME bench_vs_ct2_compat COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/bench/ct2_compat_test.py)
set_tests_properties(bench_vs_ct2_compat PROPERTIES LABELS "bench" TIMEOUT 60)
