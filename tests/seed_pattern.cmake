# Baseline (b) of issue 15, tools/dev/seed_pattern (label seed_pattern): the BLS loop over a stateless
# CodeGen step model in the real tritonserver of the `nvidia-pytriton` wheel; greedy ids == HF
# generate on a tiny random model (tests/seed_pattern/greedy_test.py). Needs torch + transformers
# in python3: SKIPPED without them (CI), never passed. After triton_install (the same venv).
add_test(NAME seed_pattern_greedy
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/seed_pattern/greedy_test.py
                 ${CMAKE_CURRENT_BINARY_DIR}/seed_pattern ${TPGEN_TRITON_VENV})
set_tests_properties(seed_pattern_greedy PROPERTIES LABELS "seed_pattern;triton" TIMEOUT 400 SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED triton_venv)
