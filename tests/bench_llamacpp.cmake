# tools/bench/bench_vs_llamacpp.py (issue 43: tpgen against llama.cpp, int4 / int8 / bf16) in its --smoke
# settings on a tiny LLaMA shape, label bench: the table's shape and its records, bad flags; no timing.
# SKIPPED where llama.cpp is not built (tools/bench/build_llamacpp.sh takes tens of minutes on 2 cores:
# CI does not build it).
add_test(NAME bench_vs_llamacpp_smoke
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/llamacpp_smoke.sh $<TARGET_FILE:tpgen>
                 ${CMAKE_CURRENT_BINARY_DIR}/bench_vs_llamacpp)
set_tests_properties(bench_vs_llamacpp_smoke PROPERTIES LABELS "bench;mpi" TIMEOUT 300 SKIP_RETURN_CODE 77)
# tools/bench/llamacpp_model.py's tensor plan (CodeGen2.5-7B: transformers' parameter count), its
# vocabulary and its config errors; stdlib only, so it runs everywhere, CI included.
add_test(NAME bench_llamacpp_model COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/bench/llamacpp_model_test.py)
set_tests_properties(bench_llamacpp_model PROPERTIES LABELS "bench" TIMEOUT 60 PASS_REGULAR_EXPRESSION "\n0 failed")
