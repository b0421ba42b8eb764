# mem_plan (label unit): the memory plan for configs/codegen-16B.json at TP 1/2/4/8, batch 1-64,
# context up to n_positions, against a fake device allocator (tests/mem_plan/test_mem_plan.c).
add_executable(test_mem_plan ${CMAKE_CURRENT_SOURCE_DIR}/mem_plan/test_mem_plan.c)
target_link_libraries(test_mem_plan PRIVATE tpgen_model tpgen_kernels tpgen_util ${MATH_LIB})
add_test(NAME mem_plan COMMAND test_mem_plan ${CMAKE_SOURCE_DIR}/configs/codegen-16B.json)
set_tests_properties(mem_plan PROPERTIES LABELS unit TIMEOUT 120)
# LLaMA: CodeGen2.5-7B, and the same with 4 KV heads (grouped-query attention; TP 8 replicates
# each KV head on 2 ranks): the KV cache and scratch planned by KV heads equal what is allocated
file(READ ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json cg25)
string(REPLACE "\"num_attention_heads\": 32," "\"num_attention_heads\": 32, \"num_key_value_heads\": 4," cg25_gqa "${cg25}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/mem_plan_gqa/config.json "${cg25_gqa}")
add_test(NAME mem_plan_codegen25 COMMAND test_mem_plan ${CMAKE_SOURCE_DIR}/configs/codegen25-7B.json)
add_test(NAME mem_plan_llama_gqa COMMAND test_mem_plan ${CMAKE_CURRENT_BINARY_DIR}/mem_plan_gqa/config.json)
set_tests_properties(mem_plan_codegen25 mem_plan_llama_gqa PROPERTIES LABELS "unit;llama" TIMEOUT 120)

# The plan at the command line (error_test: tests/errors.cmake, included before this file): a KV
# budget no machine holds is refused at start with the plan, once, on every rank; a bad
# --comm-timeout is named.
error_test(plan_does_not_fit "does not fit in host memory on rank 0: it needs [0-9.]+ MiB, [0-9.]+ MiB are free"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2,3 --kv-cache-tokens 1000000000000 ${ERR_CPU})
error_test(comm_timeout_negative "--comm-timeout expects a number in \\[0, 1e\\+06\\], got \"-1\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2,3 --comm-timeout -1 ${ERR_CPU})
# --verbose prints rank 0's plan, every buffer named
add_test(NAME mem_plan_verbose COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate
         --model ${TPGEN_TEST_DATA}/tiny-f32 --prompt-ids 1,2,3 --max-new-tokens 2 --verbose --backend cpu --threads 1)
set_tests_properties(mem_plan_verbose PROPERTIES LABELS "unit;mpi" TIMEOUT 90
  PASS_REGULAR_EXPRESSION "memory plan, rank 0 .*weights .*activations .*KV cache .*device total")
