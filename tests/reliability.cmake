# Reliability (label reliability; issue 9): each defect the audit found has the test that would
# have caught it. Faulty checkpoints are made at test time from tiny-f32 (make_faulty.py).
set(REL_DIR ${CMAKE_CURRENT_SOURCE_DIR}/reliability)
set(REL_OUT ${CMAKE_CURRENT_BINARY_DIR}/reliability)
set(REL_TINY ${TPGEN_TEST_DATA}/tiny-f32)
set(REL_FAULTY ${REL_OUT}/faulty)
set(REL_CPU --backend cpu --threads 1)
set(REL_ENV OMPI_MCA_odls_base_sigkill_timeout=0)
file(MAKE_DIRECTORY ${REL_OUT})
set(rel_ids_129 1)
foreach(i RANGE 2 129)
  string(APPEND rel_ids_129 ",${i}")
endforeach()

# rel_error(NAME REGEX [NP n] [FIXTURE] ARGS tpgen args...): a clean failure (expect_error.sh)
function(rel_error name regex)
  cmake_parse_arguments(E "FIXTURE" "" "" ${ARGN})
  set(fixture)
  if(E_FIXTURE)
    set(fixture FIXTURE reliability_faulty)
  endif()
  tpgen_expect_error(reliability_${name} ${regex} LABELS reliability errors ${fixture} ${E_UNPARSED_ARGUMENTS})
endfunction()

# rel_faulty(NAME FAULTY REGEX): `generate --prompt-ids 1,2` on the faulty checkpoint FAULTY fails cleanly
function(rel_faulty name faulty regex)
  rel_error(${name} ${regex} FIXTURE ARGS generate --model ${REL_FAULTY}/${faulty} --prompt-ids 1,2 ${REL_CPU})
endfunction()

# ---- token ids: parsed in full, checked against vocab_size, named as written ----
file(WRITE ${REL_OUT}/ids_3e9.txt "1,2\n7,3000000000\n")
file(WRITE ${REL_OUT}/ids_3e9_array.txt "[1, 2]\n[7, 8, 4294967297]\n")
rel_error(id_3e9 "token id 3000000000 at position 1 of --prompt-ids is >= vocab_size 1001"
          ARGS generate --model ${REL_TINY} --prompt-ids 1,3000000000 ${REL_CPU})
rel_error(id_3e9_one_rank "token id 3000000000 at position 1 of --prompt-ids is >= vocab_size 1001" NP 0
          ARGS generate --model ${REL_TINY} --prompt-ids 1,3000000000 ${REL_CPU})
rel_error(id_2pow32_plus1 "token id 4294967297 at position 0 of --prompt-ids is >= vocab_size 1001"
          ARGS generate --model ${REL_TINY} --prompt-ids 4294967297 ${REL_CPU})
rel_error(id_ten_digits "token id 9999999999 at position 2 of --prompt-ids is >= vocab_size 1001"
          ARGS generate --model ${REL_TINY} --prompt-ids 1,2,9999999999 ${REL_CPU})
rel_error(id_beyond_int64 "token id 123456789012345678901234567890 at position 0 of --prompt-ids is >= vocab_size"
          ARGS generate --model ${REL_TINY} --prompt-ids 123456789012345678901234567890 ${REL_CPU})
rel_error(id_json_array "token id 4294967297 at position 1 of --prompt-ids is >= vocab_size 1001"
          ARGS generate --model ${REL_TINY} --prompt-ids [1,4294967297] ${REL_CPU})
rel_error(id_file_list "token id 3000000000 at position 1 of .*ids_3e9.txt line 2 is >= vocab_size 1001"
          ARGS generate --model ${REL_TINY} --prompts-file ${REL_OUT}/ids_3e9.txt ${REL_CPU})
rel_error(id_file_array "token id 4294967297 at position 2 of .*ids_3e9_array.txt line 2 is >= vocab_size 1001"
          ARGS generate --model ${REL_TINY} --prompts-file ${REL_OUT}/ids_3e9_array.txt ${REL_CPU})
rel_error(id_score "--ids: 3000000000 at position 1 is too large"
          ARGS score --model ${REL_TINY} --ids 1,3000000000 ${REL_CPU})

# ---- flags ----
set(stop17)
foreach(i RANGE 1 17)
  list(APPEND stop17 --stop s${i})
endforeach()
rel_error(stop_count "at most 16 --stop strings"
          ARGS generate --model ${REL_TINY} --prompt-ids 1,2 ${stop17} ${REL_CPU})

# ---- faulty checkpoints, made at test time ----
find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "tests/reliability.cmake: no python3; the faulty-checkpoint tests are not added")
  return()
endif()
add_test(NAME reliability_make_faulty
         COMMAND ${Python3_EXECUTABLE} ${REL_DIR}/make_faulty.py ${REL_TINY} ${REL_FAULTY})
set_tests_properties(reliability_make_faulty PROPERTIES LABELS reliability TIMEOUT 60
                     FIXTURES_SETUP reliability_faulty)

# config: absurd sizes refused before anything is sized; the shape checks each have a test
rel_faulty(cfg_embd_huge embd_huge "n_embd 1000000000 is above tpgen's limit 65536")
rel_faulty(cfg_layers_huge layers_huge "n_layer 1000000 is above tpgen's limit 4096")
rel_faulty(cfg_eps_negative eps_negative "layer_norm_epsilon -1 must be a positive finite number")
rel_faulty(cfg_rotary_odd rotary_odd "rotary_dim 7 must be even and at most head_dim 16")
rel_error(cfg_rotary_big "rotary_dim 32 must be even and at most head_dim 16" FIXTURE
          ARGS score --model ${REL_FAULTY}/rotary_big --ids 1,2 ${REL_CPU})
rel_faulty(cfg_heads_not4 heads_not4 "n_head 2 is not a multiple of 4")
rel_faulty(cfg_heads_nodiv heads_nodiv "n_embd 64 is not divisible by n_head 12")
rel_faulty(cfg_heads_zero heads_zero "heads_zero/config\\.json: n_head 0 must be at least 1")

# index entries may not leave the model directory (the files they name exist)
rel_faulty(index_escape index_escape
           "weight_map\\[.*\\]: \"\\.\\./outside/model\\.safetensors\" leaves the model directory")
rel_faulty(index_absolute index_absolute
           "weight_map\\[.*\\]: \"/.*/outside/model\\.safetensors\" is an absolute path")

# requests and flags are checked before the weights are read: the checkpoint of `truncated`
# is broken, yet the error is about the request (reading it first would report the truncation)
rel_error(early_prompt_id "token id 5000 at position 1 of --prompt-ids is >= vocab_size 1001" FIXTURE
          ARGS generate --model ${REL_FAULTY}/truncated --prompt-ids 1,5000 ${REL_CPU})
rel_error(early_prompt_length "--prompt-ids has 129 tokens, longer than the model's n_positions=128" FIXTURE
          ARGS generate --model ${REL_FAULTY}/truncated --prompt-ids ${rel_ids_129} ${REL_CPU})
rel_error(early_kv_budget "--prompt-ids needs 48 tokens of KV cache .* but the budget is 16 tokens" FIXTURE
          ARGS generate --model ${REL_FAULTY}/truncated --prompt-ids 1,2,3 --max-new-tokens 40 --kv-cache-tokens 16 ${REL_CPU})
rel_error(early_score_id "token id 1001 at position 2 of --ids is >= vocab_size 1001" FIXTURE
          ARGS score --model ${REL_FAULTY}/truncated --ids 1,2,1001 ${REL_CPU})
rel_error(early_dtype_flag "--dtype f16: the CPU backend computes in f32 \\(default\\) or bf16" FIXTURE
          ARGS generate --model ${REL_FAULTY}/truncated --prompt-ids 1,2 ${REL_CPU} --dtype f16)

# non-finite logits: every sampling mode and score, at TP 1 and 2
foreach(np 1 2)
  add_test(NAME reliability_nonfinite_tp${np}
           COMMAND bash ${REL_DIR}/nonfinite.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${REL_FAULTY} ${REL_TINY} ${np})
  set_tests_properties(reliability_nonfinite_tp${np} PROPERTIES LABELS "reliability;mpi" TIMEOUT 300
                       ENVIRONMENT ${REL_ENV} FIXTURES_REQUIRED reliability_faulty)
endforeach()

# two-run comparisons (runs.sh): NP 0 runs tpgen without mpirun
foreach(case_np stdin_prompts:0 stdin_prompts:2 streams:1 streams:2 hf_snapshot:2 npos_huge:0 npos_huge:2)
  string(REPLACE ":" ";" parts ${case_np})
  list(GET parts 0 rcase)
  list(GET parts 1 np)
  add_test(NAME reliability_${rcase}_np${np}
           COMMAND bash ${REL_DIR}/runs.sh ${rcase} $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${REL_TINY} ${REL_FAULTY} ${np})
  set_tests_properties(reliability_${rcase}_np${np} PROPERTIES LABELS "reliability;mpi" TIMEOUT 120
                       ENVIRONMENT ${REL_ENV} FIXTURES_REQUIRED reliability_faulty)
endforeach()

# the KV cache at block boundaries: parity with blocks of 1 (every length ends on a boundary)
# and 3 tokens
foreach(bs_np 1:1 3:2)
  string(REPLACE ":" ";" parts ${bs_np})
  list(GET parts 0 bs)
  list(GET parts 1 np)
  add_test(NAME reliability_parity_block${bs}_tp${np}
           COMMAND check_parity --tpgen $<TARGET_FILE:tpgen> --np ${np} --mpiexec ${TPGEN_MPIEXEC}
                   --fixture ${REL_TINY} -- --backend cpu --threads 1 --block-size ${bs})
  set_tests_properties(reliability_parity_block${bs}_tp${np} PROPERTIES LABELS "reliability;parity;mpi"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

# f32 -> bf16 rounding (ties to even, NaN, inf) against torch, on the CPU
add_executable(test_bf16_round ${REL_DIR}/test_bf16_round.c)
add_test(NAME reliability_bf16_round COMMAND test_bf16_round ${REL_DIR}/bf16_cases.txt)
set_tests_properties(reliability_bf16_round PROPERTIES LABELS "reliability;unit" TIMEOUT 30)

# launcher/tpgen-mpirun serve: a stop at any moment drains (one SIGUSR1 once mpirun takes it) or
# ends before mpirun starts, within 3 s; a second stop forces (issue 34: a stop could be held by
# bash until mpirun exited, or kill mpirun in its first milliseconds). A stand-in mpirun, no MPI.
add_test(NAME reliability_wrapper_signals
         COMMAND python3 ${REL_DIR}/wrapper_signals.py ${CMAKE_SOURCE_DIR}/launcher/tpgen-mpirun
                 ${REL_OUT}/wrapper_signals)
set_tests_properties(reliability_wrapper_signals PROPERTIES LABELS reliability TIMEOUT 240)
# 300 stops in the wrapper's first 30 ms (mostly SIGINT, 12 wrappers at a time): none lost, each ends
# within 5 s (issue 41 item 9: bash dropped a SIGINT taken while it waited for a $(...) child)
add_test(NAME reliability_wrapper_early_stop
         COMMAND python3 ${REL_DIR}/wrapper_early_stop.py ${CMAKE_SOURCE_DIR}/launcher/tpgen-mpirun
                 ${REL_OUT}/wrapper_early_stop 300)
set_tests_properties(reliability_wrapper_early_stop PROPERTIES LABELS reliability TIMEOUT 120)
