# tpgen bench reports what it measured (label bench): the weight and KV bytes of a decode step
# in each stored dtype (f32, bf16, int8 + f32 scales) at TP 1 and 2, computed independently from
# config.json; the kernel each op class took, per JSON row, against the paths the dispatch and its
# env overrides choose; defaults that fit a model with a small n_positions, and a clear error for
# an explicit --context that does not fit. CPU backend, MPI communicator.
set(BENCH_NAMES ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_names.py)
foreach(dt f32 bf16 int8)
  foreach(np 1 2)
    add_test(NAME bench_bytes_${dt}_tp${np}
             COMMAND python3 ${BENCH_NAMES} $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${TPGEN_TEST_DATA}/tiny-f32
                     bytes ${dt} ${np})
    set_tests_properties(bench_bytes_${dt}_tp${np} PROPERTIES LABELS "bench;mpi" TIMEOUT 240 SKIP_RETURN_CODE 77)
  endforeach()
endforeach()
add_test(NAME bench_kernel_names
         COMMAND python3 ${BENCH_NAMES} $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${TPGEN_TEST_DATA}/tiny-f32 names)
set_tests_properties(bench_kernel_names PROPERTIES LABELS "bench;mpi" TIMEOUT 600 SKIP_RETURN_CODE 77)
add_test(NAME bench_defaults_fit
         COMMAND python3 ${BENCH_NAMES} $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${TPGEN_TEST_DATA}/rot-full-bf16 defaults)
set_tests_properties(bench_defaults_fit PROPERTIES LABELS "bench;mpi" TIMEOUT 240)

# An explicit --context (or --steps) that does not fit: one clear error naming the limit.
foreach(case "context;--context 40 --steps 32;--context 40 \\+ 35 steps \\(32 timed \\+ 3 warm-up\\) exceeds n_positions=64 \\(at most --context 28 with --steps 32"
             "steps;--steps 61;--steps 61 \\+ 3 warm-up steps \\+ 1 exceeds n_positions=64 \\(at most 60 steps fit\\)")
  list(GET case 0 name)
  list(GET case 1 flags)
  list(GET case 2 regex)
  separate_arguments(flags)
  add_test(NAME bench_err_fit_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/errors/expect_error.sh ${regex}
                   ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> bench
                   --model ${TPGEN_TEST_DATA}/rot-full-bf16 ${flags} --backend cpu --threads 1)
  set_tests_properties(bench_err_fit_${name} PROPERTIES LABELS "bench;errors;mpi" TIMEOUT 90
                       ENVIRONMENT OMPI_MCA_odls_base_sigkill_timeout=0)
endforeach()
