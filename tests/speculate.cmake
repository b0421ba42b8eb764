# Prompt-lookup speculative decoding, `--speculate ngram:K[:N]` (label speculate).
#  - unit: flag parsing, the draft proposer, and the acceptance rule checked statistically
#    (chi-square against the processed distribution, and against plain sampling) on synthetic
#    distributions with fixed seeds (tests/speculate/test_speculate.c);
#  - greedy output identical with and without --speculate at TP 1, 2, 4, on every parity fixture
#    and the tiny trained model (repeating / never-repeating prompts, a prompt near n_positions,
#    tiny step budgets, stop strings mid-step);
#  - sampled generation: seeded runs reproducible, and the distribution of sampled tokens the
#    same as plain sampling's (a two-sample chi-square over many request streams);
#  - the server: usage.speculative and /metrics counters, greedy completions as `generate`'s,
#    every KV block free at the end;
#  - bad --speculate values: a clear error naming the flag, before any weights are read.
add_executable(test_speculate ${CMAKE_CURRENT_SOURCE_DIR}/speculate/test_speculate.c)
target_link_libraries(test_speculate PRIVATE tpgen_sched ${MATH_LIB})
add_test(NAME speculate_unit COMMAND test_speculate)
set_tests_properties(speculate_unit PROPERTIES LABELS "speculate;unit" TIMEOUT 120)

tpgen_parity_fixtures(SPECULATE_FIXTURES)
foreach(fixture ${SPECULATE_FIXTURES})
  get_filename_component(name ${fixture} NAME)
  add_test(NAME speculate_greedy_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/speculate/greedy_same.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${fixture})
  set_tests_properties(speculate_greedy_${name} PROPERTIES LABELS "speculate;mpi" TIMEOUT 300)
endforeach()
add_test(NAME speculate_greedy_codegen_tiny_py
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/speculate/greedy_same.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py text)
set_tests_properties(speculate_greedy_codegen_tiny_py PROPERTIES LABELS "speculate;mpi" TIMEOUT 300)

# Bad --speculate values (tests/errors/expect_error.sh): one clear error, every rank exits 1,
# nothing read (the model dir does not even exist: the flag is refused first).
foreach(case "none|ngram" "zero|ngram:0" "big|ngram:65" "n_zero|ngram:4:0" "n_big|ngram:4:17" "junk|ngram:4x"
             "extra|ngram:4:3:1" "kind|draft:4" "empty|ngram:")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 value)
  add_test(NAME speculate_bad_flag_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh
                   "--speculate expects ngram:K or ngram:K:N .*got \"${value}\""
                   ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate --model /nonexistent/model
                   --prompt-ids 1,2 --speculate ${value})
  set_tests_properties(speculate_bad_flag_${name} PROPERTIES LABELS "speculate;errors;mpi" TIMEOUT 60
                       ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
endforeach()
add_test(NAME speculate_bad_flag_serve
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh
                 "--speculate expects ngram:K or ngram:K:N .*got \"ngram:0\""
                 ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> serve --model /nonexistent/model
                 --port 0 --speculate ngram:0)
set_tests_properties(speculate_bad_flag_serve PROPERTIES LABELS "speculate;errors;mpi" TIMEOUT 60
                     ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
add_test(NAME speculate_bad_flag_score
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh "unknown flag --speculate for `tpgen score`"
                 ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> score --model /nonexistent/model
                 --ids 1,2 --speculate ngram:4)
set_tests_properties(speculate_bad_flag_score PROPERTIES LABELS "speculate;errors;mpi" TIMEOUT 60
                     ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)

# Sampled: distributed as plain sampling, reproducible with a seed (tests/speculate/sampled_dist.py).
add_test(NAME speculate_sampled_dist
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/speculate/sampled_dist.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(speculate_sampled_dist PROPERTIES LABELS "speculate;mpi" TIMEOUT 300)

# The server with --speculate: usage.speculative, /metrics counters, greedy as `generate`, no KV
# block leaked (tests/speculate/serve_spec.py; stdlib HTTP only).
foreach(np 1 2)
  add_test(NAME speculate_serve_tp${np}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/speculate/serve_spec.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                   ${np} ${TPGEN_TEST_DATA}/tiny-f32)
  set_tests_properties(speculate_serve_tp${np} PROPERTIES LABELS "speculate;server;mpi" TIMEOUT 180)
endforeach()
