# Bad input (label errors): every case must fail with a clear message printed once, a non-zero
# status and no hang (tests/errors/expect_error.sh checks all of that). Two MPI ranks unless the
# case is about running as one rank; CPU backend throughout.
set(ERR_DIR ${CMAKE_CURRENT_BINARY_DIR}/errors)
set(ERR_TINY ${TPGEN_TEST_DATA}/tiny-f32)          # H=4, V=1001, n_positions=128, no tokenizer
set(ERR_CPU --backend cpu --threads 1)
set(ERR_MPI2 ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2)

# error_test(NAME REGEX [NP n] [FIXTURE f] [DRIVER_FLAGS ...] ARGS tpgen args...)
# NP 0 runs tpgen without mpirun (tpgen_expect_error, tests/common/test_helpers.cmake).
function(error_test name regex)
  cmake_parse_arguments(E "" "NP" "" ${ARGN})
  set(labels errors)
  if(NOT DEFINED E_NP OR NOT E_NP EQUAL 0)
    list(APPEND labels mpi)
  endif()
  tpgen_expect_error(errors_${name} ${regex} LABELS ${labels} ${ARGN})
endfunction()

# Inputs written at configure time.
file(MAKE_DIRECTORY ${ERR_DIR})
set(ids_129 1)
foreach(i RANGE 2 129)
  string(APPEND ids_129 ",${i}")
endforeach()
file(WRITE ${ERR_DIR}/prompts_bad_line.txt "1,2,3\n\n[1, 2, x]\n")
file(WRITE ${ERR_DIR}/prompts_bad_list.txt "1,2,3\n5,,6\n")
file(WRITE ${ERR_DIR}/prompts_empty_ids.txt "1,2,3\n\n\n[]\n")
file(WRITE ${ERR_DIR}/prompts_no_prompt.txt "\n\n")
file(WRITE ${ERR_DIR}/prompts_text.txt "1,2,3\n[4, 5]\ndef hello():\n")
file(WRITE ${ERR_DIR}/prompts_vocab.txt "1,2,3\n\n[7, 1001]\n")
file(WRITE ${ERR_DIR}/prompts_long.txt "1,2,3\n${ids_129}\n")

# ---- tensor parallelism ----
error_test(tp_does_not_divide_heads "TP=8 .*n_head=12.*valid TP sizes: 1, 2, 3, 4, 6, 12" NP 8
           ARGS generate --model ${TPGEN_TEST_DATA}/heads12-f32 --prompt-ids 1,2 ${ERR_CPU})
error_test(tp_does_not_divide_heads_score "valid TP sizes: 1, 2, 3, 4, 6, 12" NP 8
           ARGS score --model ${TPGEN_TEST_DATA}/heads12-f32 --ids 1,2 ${ERR_CPU})

# ---- requests ----
error_test(prompt_id_ge_vocab "token id 1001 at position 2 of --prompt-ids is >= vocab_size 1001"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2,1001 ${ERR_CPU})
error_test(prompt_id_ge_vocab_file "token id 1001 at position 1 of .*prompts_vocab.txt line 3 is >= vocab_size 1001"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/prompts_vocab.txt ${ERR_CPU})
error_test(score_id_ge_vocab "token id 1001 at position 2 of --ids is >= vocab_size 1001"
           ARGS score --model ${ERR_TINY} --ids 1,2,1001 ${ERR_CPU})
error_test(prompt_too_long "--prompt-ids has 129 tokens, longer than the model's n_positions=128"
           ARGS generate --model ${ERR_TINY} --prompt-ids ${ids_129} ${ERR_CPU})
error_test(prompt_too_long_file "prompts_long.txt line 2 has 129 tokens, longer than the model's n_positions=128"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/prompts_long.txt ${ERR_CPU})
error_test(score_too_long "--ids has 129 tokens, longer than the model's n_positions=128"
           ARGS score --model ${ERR_TINY} --ids ${ids_129} ${ERR_CPU})
error_test(prompt_ids_empty "--prompt-ids holds no token ids"
           ARGS generate --model ${ERR_TINY} --prompt-ids= ${ERR_CPU})
error_test(prompt_ids_empty_item "--prompt-ids: expected a token id at \",2\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,,2 ${ERR_CPU})
error_test(prompt_ids_negative "--prompt-ids: expected a token id at \"-3\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,-3 ${ERR_CPU})
error_test(score_ids_empty "--ids is empty"
           ARGS score --model ${ERR_TINY} --ids= ${ERR_CPU})
error_test(score_ids_bad "--ids: \"1,x\" is not a comma-separated list of non-negative integers"
           ARGS score --model ${ERR_TINY} --ids 1,x ${ERR_CPU})
error_test(prompts_file_empty_ids "prompts_empty_ids.txt line 4 holds no token ids"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/prompts_empty_ids.txt ${ERR_CPU})
error_test(prompts_file_no_prompt "--prompts-file .*prompts_no_prompt.txt holds no prompt"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/prompts_no_prompt.txt ${ERR_CPU})
error_test(prompts_file_missing "cannot read --prompts-file .*no_such_prompts.txt: No such file"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/no_such_prompts.txt ${ERR_CPU})
error_test(prompts_file_bad_line "prompts_bad_line.txt line 3 starts with '\\[' but is not a JSON array"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/prompts_bad_line.txt ${ERR_CPU})
error_test(prompts_file_bad_list "prompts_bad_list.txt line 2: expected a token id"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/prompts_bad_list.txt ${ERR_CPU})
error_test(prompt_text_no_tokenizer "--prompt is text, which needs a tokenizer in .*tiny-f32"
           ARGS generate --model ${ERR_TINY} --prompt hello ${ERR_CPU})
error_test(prompts_file_text_no_tokenizer "prompts_text.txt line 3 is text, which needs a tokenizer in .*tiny-f32"
           ARGS generate --model ${ERR_TINY} --prompts-file ${ERR_DIR}/prompts_text.txt ${ERR_CPU})
error_test(stop_no_tokenizer "--stop needs a tokenizer in .*tiny-f32"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --stop "\\n" ${ERR_CPU})
error_test(stop_empty "--stop needs a non-empty string"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --stop= ${ERR_CPU})
error_test(kv_budget_too_small "--prompt-ids needs 48 tokens of KV cache .* but the budget is 16 tokens.*raise --kv-cache-tokens"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2,3 --max-new-tokens 40 --kv-cache-tokens 16 ${ERR_CPU})
error_test(kv_budget_too_small_score "scoring 40 tokens needs 40 tokens of KV cache but the budget is 16"
           ARGS score --model ${ERR_TINY} --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40
                --kv-cache-tokens 16 ${ERR_CPU})

# ---- flags ----
error_test(unknown_flag "unknown flag --bogus for `tpgen generate`"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --bogus ${ERR_CPU})
error_test(flag_of_other_command "unknown flag --temperature for `tpgen score`"
           ARGS score --model ${ERR_TINY} --ids 1,2 --temperature 0.5 ${ERR_CPU})
error_test(missing_model "--model DIR is required"
           ARGS generate --prompt-ids 1,2 ${ERR_CPU})
error_test(model_dir_missing "--model .*no_such_model: No such file or directory"
           ARGS generate --model ${ERR_DIR}/no_such_model --prompt-ids 1,2 ${ERR_CPU})
error_test(no_prompt "give exactly one of --prompt, --prompt-ids, --prompts-file"
           ARGS generate --model ${ERR_TINY} ${ERR_CPU})
error_test(two_prompts "give exactly one of --prompt, --prompt-ids, --prompts-file"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1 --prompts-file ${ERR_DIR}/prompts_vocab.txt ${ERR_CPU})
error_test(bad_integer "--max-new-tokens expects an integer in \\[0, [0-9]+\\], got \"abc\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --max-new-tokens abc ${ERR_CPU})
error_test(bad_integer_suffix "--top-k expects an integer .* got \"5x\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --top-k 5x ${ERR_CPU})
error_test(number_out_of_range "--top-p expects a number in \\(0, 1\\], got 1.5$"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --top-p 1.5 ${ERR_CPU})
error_test(number_nan "--temperature expects a number in \\[0, 100\\], got nan"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --temperature nan ${ERR_CPU})
error_test(flag_without_value "--seed needs a value"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 ${ERR_CPU} --seed)
error_test(bad_backend "--backend must be cpu or cuda, got \"gpu\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 --backend gpu)
error_test(bad_dtype "--dtype must be f16 or bf16 \\(cuda\\) or f32\\|bf16 \\(cpu\\), got \"fp8\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 ${ERR_CPU} --dtype fp8)
error_test(dtype_on_cpu "--dtype f16: the CPU backend computes in f32 \\(default\\) or bf16"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 ${ERR_CPU} --dtype f16)
error_test(bad_comm "--comm must be mpi or nccl, got \"tcp\""
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 ${ERR_CPU} --comm tcp)
error_test(nccl_on_cpu "--comm nccl needs --backend cuda"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 ${ERR_CPU} --comm nccl)
error_test(batch_over_step_tokens "--max-batch 64 exceeds --max-batch-tokens 8"
           ARGS generate --model ${ERR_TINY} --prompt-ids 1,2 ${ERR_CPU} --max-batch 64 --max-batch-tokens 8)

# ---- bench ----
error_test(bench_needs_model "--model DIR is required \\(or --config FILE --random-weights\\)"
           ARGS bench --config ${ERR_TINY}/config.json ${ERR_CPU})
error_test(bench_bad_batch "--batch: \"1,x\" is not a comma-separated list of non-negative integers"
           ARGS bench --model ${ERR_TINY} --batch 1,x ${ERR_CPU})
error_test(bench_zero_batch "--batch sizes must be >= 1"
           ARGS bench --model ${ERR_TINY} --batch 0 ${ERR_CPU})
error_test(bench_context_too_long "--context 120 \\+ 35 steps \\(32 timed \\+ 3 warm-up\\) exceeds n_positions=128"
           ARGS bench --model ${ERR_TINY} --context 120 ${ERR_CPU})

# ---- one rank, without mpirun ----
error_test(single_rank_id_ge_vocab "token id 1001 at position 0 of --prompt-ids is >= vocab_size 1001" NP 0
           ARGS generate --model ${ERR_TINY} --prompt-ids 1001 ${ERR_CPU})
error_test(single_rank_unknown_flag "unknown flag --bogus for `tpgen score`" NP 0
           ARGS score --model ${ERR_TINY} --ids 1,2 --bogus ${ERR_CPU})
error_test(single_rank_unknown_command "unknown command \"frobnicate\"" NP 0 DRIVER_FLAGS --status 2
           ARGS frobnicate --model ${ERR_TINY})
error_test(info_takes_no_flags "`tpgen info` takes no flags" NP 0 DRIVER_FLAGS --status 2 ARGS info --bogus)

# ---- broken checkpoints, made from the fixtures at test time ----
find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "tests/errors.cmake: no python3; the broken-checkpoint error tests are not added")
  return()
endif()
set(BROKEN ${ERR_DIR}/broken)
add_test(NAME errors_make_broken_checkpoints
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/errors/make_broken.py ${ERR_TINY}
                 ${TPGEN_TEST_DATA}/heads24-f16-sharded ${TPGEN_TEST_DATA}/tokenizer/codegen ${BROKEN})
set_tests_properties(errors_make_broken_checkpoints PROPERTIES LABELS errors TIMEOUT 60
                     FIXTURES_SETUP errors_broken)

# checkpoint_test(NAME CASE REGEX): generate on 2 ranks from ${BROKEN}/CASE
function(checkpoint_test name case regex)
  error_test(${name} "${regex}" FIXTURE errors_broken
             ARGS generate --model ${BROKEN}/${case} --prompt-ids 1,2 --max-new-tokens 2 ${ERR_CPU})
endfunction()
checkpoint_test(ckpt_missing_tensor extra_layer
                "missing tensor transformer\\.h\\.2\\.[a-z_.0-9]+ in the checkpoint .*broken/extra_layer")
checkpoint_test(ckpt_inner_shape inner_changed
                "tensor transformer\\.h\\.0\\.mlp\\.fc_in\\.weight in .*inner_changed/model\\.safetensors has shape \\[256, 64\\], expected \\[128, 64\\]")
checkpoint_test(ckpt_vocab_shape vocab_changed
                "tensor transformer\\.wte\\.weight in .*vocab_changed/model\\.safetensors has shape \\[1001, 64\\], expected \\[1008, 64\\]")
checkpoint_test(ckpt_config_not_json config_not_json
                "config_not_json/config\\.json is not a JSON object: line 2 column [0-9]+")
checkpoint_test(ckpt_config_no_n_embd config_no_embd
                "config_no_embd/config\\.json: missing field \"n_embd\"")
checkpoint_test(ckpt_truncated truncated
                "truncated/model\\.safetensors: truncated: tensor [a-z_.0-9]+ needs bytes up to [0-9]+ of the data area, file has [0-9]+")
checkpoint_test(ckpt_header_not_json header_not_json
                "header_not_json/model\\.safetensors: header .* is not valid JSON")
checkpoint_test(ckpt_header_too_long header_too_long
                "header_too_long/model\\.safetensors: header length [0-9]+ bytes is absurd")
checkpoint_test(ckpt_offsets_outside offsets_outside
                "offsets_outside/model\\.safetensors: .*tensor transformer\\.h\\.0\\.mlp\\.fc_in\\.bias needs bytes up to [0-9]+")
checkpoint_test(ckpt_no_safetensors no_safetensors
                "no model\\.safetensors or model\\.safetensors\\.index\\.json in .*broken/no_safetensors")
checkpoint_test(ckpt_index_missing_shard index_missing_shard
                "index_missing_shard/model-00004-of-00004\\.safetensors: cannot open .*weight_map of .*model\\.safetensors\\.index\\.json")
checkpoint_test(ckpt_dtype_f64 dtype_f64
                "dtype_f64/model\\.safetensors: tensor transformer\\.h\\.1\\.ln_1\\.bias: dtype F64 is not supported")
checkpoint_test(ckpt_dtype_unknown dtype_unknown
                "dtype_unknown/model\\.safetensors: tensor transformer\\.h\\.1\\.ln_1\\.bias: unknown dtype \"I4\"")
error_test(tokenizer_not_json "tokenizer_not_json/vocab\\.json: line [0-9]+ column [0-9]+" FIXTURE errors_broken
           ARGS generate --model ${BROKEN}/tokenizer_not_json --prompt hello ${ERR_CPU})
error_test(text_ids_beyond_vocab "token id [0-9]+ at position 0 of --prompt is >= vocab_size 1001" FIXTURE errors_broken
           ARGS generate --model ${BROKEN}/tokenizer_bigger_vocab --prompt "hello world" ${ERR_CPU})
# the same checks from score, and on one rank
error_test(ckpt_shape_score "fc_in\\.weight in .*has shape \\[256, 64\\], expected \\[128, 64\\]" FIXTURE errors_broken
           ARGS score --model ${BROKEN}/inner_changed --ids 1,2 ${ERR_CPU})
error_test(single_rank_ckpt_truncated "truncated/model\\.safetensors: truncated" NP 0 FIXTURE errors_broken
           ARGS generate --model ${BROKEN}/truncated --prompt-ids 1,2 ${ERR_CPU})
# the unbroken copy runs: the breakage, not the copying, is what the tests above see
add_test(NAME errors_ckpt_valid_copy_runs
         COMMAND ${ERR_MPI2} $<TARGET_FILE:tpgen> generate --model ${BROKEN}/valid --prompt-ids 1,2
                 --max-new-tokens 2 ${ERR_CPU})
set_tests_properties(errors_ckpt_valid_copy_runs PROPERTIES LABELS "errors;mpi" TIMEOUT 60 FIXTURES_REQUIRED errors_broken)

# ---- a model path that does not exist is said first (not "needs a tokenizer") ----
error_test(model_dir_missing_text_prompt "--model /nonexistent/tpgen-model: No such file or directory"
           ARGS generate --model /nonexistent/tpgen-model --prompt "def f" ${ERR_CPU})

# ---- environment ----
# OMP_NUM_THREADS above --threads' limit (4096; 100000 crashed in libgomp, 40,000-60,000 ended in
# "Thread creation failed"): refused on every rank naming the variable and the limit, also a
# level of libgomp's list form (issue 41 item 6)
error_test(env_omp_threads "OMP_NUM_THREADS=100000: 100000 threads per rank is above tpgen's limit 4096"
           ARGS generate --model ${TPGEN_TEST_DATA}/tiny-f32 --prompt-ids 1,2 --max-new-tokens 2 --backend cpu)
set_tests_properties(errors_env_omp_threads PROPERTIES
                     ENVIRONMENT "OMPI_MCA_odls_base_sigkill_timeout=0;OMP_NUM_THREADS=100000")
error_test(env_omp_threads_list "OMP_NUM_THREADS=2,50000: 50000 threads per rank is above tpgen's limit 4096" NP 0
           ARGS bench --config ${CMAKE_SOURCE_DIR}/configs/tiny-demo.json --random-weights --backend cpu --batch 1
                --context 8 --steps 1 --prefill 0)
set_tests_properties(errors_env_omp_threads_list PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2,50000")
