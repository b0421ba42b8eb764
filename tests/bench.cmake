# Benchmark commands (label bench): `tpgen bench-comm` sums exact at TP 2 and 4 for every dtype,
# a perturbed input caught (#wrong > 0, non-zero exit), bad flags refused clearly; `tpgen bench`
# prefill and decode rows with the read-bandwidth floor. CPU backend, MPI communicator.
set(BENCH_DIR ${CMAKE_CURRENT_SOURCE_DIR}/bench)
foreach(np 2 4)
  add_test(NAME bench_comm_exact_tp${np}
           COMMAND bash ${BENCH_DIR}/comm.sh exact $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${np})
  set_tests_properties(bench_comm_exact_tp${np} PROPERTIES LABELS "bench;mpi" TIMEOUT 90)
endforeach()
add_test(NAME bench_comm_detects_wrong COMMAND bash ${BENCH_DIR}/comm.sh perturb $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 2)
set_tests_properties(bench_comm_detects_wrong PROPERTIES LABELS "bench;mpi" TIMEOUT 90
                     ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
add_test(NAME bench_rows COMMAND bash ${BENCH_DIR}/bench_rows.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                                 ${TPGEN_TEST_DATA}/tiny-f32)
set_tests_properties(bench_rows PROPERTIES LABELS "bench;mpi" TIMEOUT 120)

# Bad flags: a clear error once, non-zero status, no hang (tests/errors/expect_error.sh).
function(bench_error_test name regex)
  tpgen_expect_error(bench_err_${name} ${regex} LABELS bench errors mpi ARGS ${ARGN})
endfunction()
set(BENCH_CPU --backend cpu --threads 1)
bench_error_test(comm_sizes_malformed "--sizes expects MIN:MAX in bytes, each 4 to 2147483648 \\(like 8:268435456 or 8:256M\\), got \"8-1024\""
                 bench-comm --sizes 8-1024 ${BENCH_CPU})
bench_error_test(comm_sizes_suffix "--sizes expects MIN:MAX .*got \"8:1X\""
                 bench-comm --sizes 8:1X ${BENCH_CPU})
bench_error_test(comm_sizes_too_big "--sizes expects MIN:MAX in bytes, each 4 to 2147483648 .*got \"8:4G\""
                 bench-comm --sizes 8:4G ${BENCH_CPU})
bench_error_test(comm_sizes_min_gt_max "--sizes: MIN 1024 exceeds MAX 8"
                 bench-comm --sizes 1K:8 ${BENCH_CPU})
bench_error_test(comm_sizes_below_element "--sizes: MIN 2 is below 4 bytes \\(one f32 element\\)"
                 bench-comm --sizes 2:8 ${BENCH_CPU})
bench_error_test(comm_iters_zero "--iters expects an integer in \\[1, 100000\\], got \"0\""
                 bench-comm --iters 0 ${BENCH_CPU})
bench_error_test(comm_dtypes "--dtypes expects a list of f32, f16, bf16 \\(like f32,bf16\\), got \"f32,f64\""
                 bench-comm --dtypes f32,f64 ${BENCH_CPU})
bench_error_test(comm_unknown_flag "unknown flag --model for `tpgen bench-comm`"
                 bench-comm --model x ${BENCH_CPU})
bench_error_test(prefill_list "--prefill: \"128,x\" is not a comma-separated list of non-negative integers"
                 bench --model ${TPGEN_TEST_DATA}/tiny-f32 --prefill 128,x ${BENCH_CPU})
bench_error_test(prefill_zero "--prefill lengths must be >= 1 \\(or --prefill 0 for none\\)"
                 bench --model ${TPGEN_TEST_DATA}/tiny-f32 --prefill 0,128 ${BENCH_CPU})
bench_error_test(prefill_runs_zero "--prefill-runs expects an integer in \\[1, 1000\\], got \"0\""
                 bench --model ${TPGEN_TEST_DATA}/tiny-f32 --prefill-runs 0 ${BENCH_CPU})

# tools/bench/bench_context.py (decode against context, builds and variants side by side): its table,
# records and bad flags on the tiny demo config; no timing asserted.
add_test(NAME bench_context_smoke COMMAND bash ${BENCH_DIR}/bench_context_smoke.sh ${CMAKE_BINARY_DIR}
                                          ${CMAKE_CURRENT_BINARY_DIR}/bench_context)
set_tests_properties(bench_context_smoke PROPERTIES LABELS "bench" TIMEOUT 120)
