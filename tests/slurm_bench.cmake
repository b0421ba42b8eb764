# launcher/tpgen-bench.sbatch on the one-node test cluster of tests/slurm.cmake (labels slurm and
# bench): tests/slurm/sbatch_bench.sh. Globbed after slurm.cmake, whose cluster fixture, variables
# and skip conditions it reuses; registers nothing where slurm.cmake is absent.
if(DEFINED TPGEN_SLURM_TESTS)
  if(NOT TPGEN_SLURMCTLD OR NOT TPGEN_MUNGED OR NOT TPGEN_SBATCH OR NOT TPGEN_UID STREQUAL "0")
    add_test(NAME slurm_sbatch_bench COMMAND sh -c "echo 'SKIPPED: needs root and slurm-wlm + munge (bash tools/dev/install-deps.sh), then reconfigure'; exit 77")
    set_tests_properties(slurm_sbatch_bench PROPERTIES LABELS "slurm;bench" SKIP_RETURN_CODE 77)
  else()
    add_test(NAME slurm_sbatch_bench
             COMMAND bash ${TPGEN_SLURM_TESTS}/sbatch_bench.sh $<TARGET_FILE:tpgen> ${TPGEN_TEST_DATA}/tiny-f32
                     ${TPGEN_TEST_DATA}/tokenizer/codegen ${CMAKE_CURRENT_BINARY_DIR}/slurm/bench)
    set_tests_properties(slurm_sbatch_bench PROPERTIES
                         LABELS "slurm;bench;mpi" TIMEOUT 120 FIXTURES_REQUIRED "slurm_cluster;bench_deps"
                         RESOURCE_LOCK slurm_cluster ENVIRONMENT "SLURM_CONF=${TPGEN_SLURM_DIR}/etc/slurm.conf")
  endif()
endif()
