# Sampling (label sampling): the sampler against double references (unit), and seeded sampled
# generation through `tpgen generate` across TP sizes (mpi).
add_executable(test_sampler ${CMAKE_CURRENT_SOURCE_DIR}/sampling/test_sampler.c)
target_link_libraries(test_sampler PRIVATE tpgen_sched ${MATH_LIB})
add_test(NAME sampler COMMAND test_sampler)
set_tests_properties(sampler PROPERTIES LABELS "sampling;unit" TIMEOUT 60)

# End to end on tiny-f32: sampled ids identical at TP 1, 2, 4 and on a rerun; another seed
# differs. Greedy against HF is the parity tests' job.
set(SAMPLING_MODEL ${TPGEN_TEST_DATA}/tiny-f32)
set(SAMPLING_CASES
    "topk|7|--temperature 0.8 --top-k 20"
    "topp|7|--temperature 1 --top-p 0.9"
    "penalty|7|--temperature 1 --repetition-penalty 1.3"
    "topk_topp_penalty|11|--temperature 0.7 --top-k 50 --top-p 0.8 --repetition-penalty 1.2")
foreach(case IN LISTS SAMPLING_CASES)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 seed)
  list(GET parts 2 flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  add_test(NAME sampling_tp_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sampling/sampled_generate.sh $<TARGET_FILE:tpgen>
                   ${TPGEN_MPIEXEC} ${SAMPLING_MODEL} ${seed} -- ${flags})
  set_tests_properties(sampling_tp_${name} PROPERTIES LABELS "sampling;mpi" TIMEOUT 120)
endforeach()

# EOS sampled as the max_new_tokens-th token says finish_reason "stop", not "length" (issue 41);
# the server's side is in tests/server/eos_stop_test.py.
add_test(NAME sampling_eos_at_length
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sampling/eos_at_length.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC}
                 ${SAMPLING_MODEL})
set_tests_properties(sampling_eos_at_length PROPERTIES LABELS "sampling;mpi" TIMEOUT 120)
