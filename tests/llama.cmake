# LLaMA (CodeGen2.5's architecture; engine/model/arch.h): HF parity is in the globbing tests (parity.cmake
# at TP 1/2/4, bin.cmake, cpu_int8.cmake, cpu_bf16.cmake) over the tests/data/llama-* fixtures of
# tools/fixtures/make_llama_fixtures.py. Here: bad configs and checkpoints (label errors), each refused
# with the key, tensor or TP size named, through error_test (tests/errors.cmake).
set(LLAMA_ERR ${CMAKE_CURRENT_BINARY_DIR}/llama_errors)
set(LLAMA_GQA ${TPGEN_TEST_DATA}/llama-gqa-bf16-sharded) # H=8, Hk=2, E=128, 2 layers, 3 shards

# llama_config(CASE MEMBERS): LLAMA_ERR/CASE/config.json, a small LLaMA config: the shape keys no
# case changes, then MEMBERS.
function(llama_config case extra)
  file(MAKE_DIRECTORY ${LLAMA_ERR}/${case})
  file(WRITE ${LLAMA_ERR}/${case}/config.json
       "{\"vocab_size\": 515, \"max_position_embeddings\": 64, \"intermediate_size\": 200, ${extra}}\n")
endfunction()
set(L_OK "\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"num_hidden_layers\": 2")
set(L_E128 "${L_OK}, \"hidden_size\": 128, \"num_attention_heads\": 8")
llama_config(rope_scaling "${L_E128}, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}")
llama_config(rope_type "${L_E128}, \"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0}")
llama_config(hidden_act "${L_E128}, \"hidden_act\": \"gelu\"")
llama_config(kv_nodiv "${L_E128}, \"num_key_value_heads\": 3")
llama_config(eps "${L_E128}, \"rms_norm_eps\": 0")
llama_config(tp_kv "${L_OK}, \"hidden_size\": 96, \"num_attention_heads\": 12, \"num_key_value_heads\": 4")
llama_config(arch_mismatch "\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"codegen\", \"hidden_size\": 128")
llama_config(arch_unknown "\"architectures\": [\"MistralForCausalLM\"], \"model_type\": \"mistral\", \"hidden_size\": 128")
# checkpoints whose config.json disagrees with the tensors: the GQA fixture's shards, linked
file(GLOB gqa_files ${LLAMA_GQA}/*.safetensors ${LLAMA_GQA}/*.index.json)
foreach(case kv_heads_changed extra_layer)
  file(MAKE_DIRECTORY ${LLAMA_ERR}/${case})
  foreach(f ${gqa_files})
    get_filename_component(fn ${f} NAME)
    file(CREATE_LINK ${f} ${LLAMA_ERR}/${case}/${fn} SYMBOLIC)
  endforeach()
endforeach()
file(READ ${LLAMA_GQA}/config.json gqa_cfg)
string(REPLACE "\"num_key_value_heads\": 2" "\"num_key_value_heads\": 4" cfg "${gqa_cfg}")
file(WRITE ${LLAMA_ERR}/kv_heads_changed/config.json "${cfg}")
string(REPLACE "\"num_hidden_layers\": 2" "\"num_hidden_layers\": 3" cfg "${gqa_cfg}")
file(WRITE ${LLAMA_ERR}/extra_layer/config.json "${cfg}")

# llama_error(NAME REGEX CASE [NP n] [flags...]): generate on 2 ranks (or NP) from LLAMA_ERR/CASE
function(llama_error name regex case)
  cmake_parse_arguments(L "" "NP" "" ${ARGN})
  if(NOT DEFINED L_NP)
    set(L_NP 2)
  endif()
  error_test(llama_${name} "${regex}" NP ${L_NP}
             ARGS generate --model ${LLAMA_ERR}/${case} --prompt-ids 1,2 --max-new-tokens 2 ${ERR_CPU}
                  ${L_UNPARSED_ARGUMENTS})
  set_tests_properties(errors_llama_${name} PROPERTIES LABELS "errors;mpi;llama")
endfunction()
llama_error(rope_scaling "rope_scaling_?[a-z]*/config\\.json: rope_scaling \"linear\" is not supported" rope_scaling)
llama_error(rope_type "rope_type \"llama3\" is not supported \\(tpgen runs plain RoPE" rope_type)
llama_error(hidden_act "hidden_act \"gelu\" is not supported \\(LLaMA's MLP is SiLU-gated" hidden_act)
llama_error(kv_heads_nodiv "num_attention_heads 8 is not a multiple of num_key_value_heads 3" kv_nodiv)
llama_error(eps "rms_norm_eps 0 must be a positive finite number" eps)
llama_error(tp_kv_heads
            "TP=3 .* neither divides nor is a multiple of num_key_value_heads=4.*valid TP sizes: 1, 2, 4, 12" tp_kv NP 3)
llama_error(arch_mismatch "architectures says LlamaForCausalLM but model_type says \"codegen\"" arch_mismatch)
llama_error(arch_unknown "architectures \\[\"MistralForCausalLM\"\\] is not one tpgen runs. it runs CodeGenForCausalLM .*LlamaForCausalLM" arch_unknown)
llama_error(kv_heads_shape
            "tensor model\\.layers\\.0\\.self_attn\\.k_proj\\.weight in .*has shape \\[32, 128\\], expected \\[64, 128\\]"
            kv_heads_changed)
llama_error(missing_layer "missing tensor model\\.layers\\.2\\.input_layernorm\\.weight in the checkpoint" extra_layer)
llama_error(qkv_groups_flag "--qkv-groups is for CodeGen's fused qkv_proj. LlamaForCausalLM has separate q/k/v"
            kv_heads_changed --qkv-groups 4)

# `tpgen bench --random-weights` on a LLaMA shape, f32 / int8 / bf16, KV bytes by KV heads
# (label bench): TP 1, 2 (KV heads split) and 4 (replicated)
foreach(np 1 2 4)
  add_test(NAME llama_bench_random_tp${np}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/llama/bench_random.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${np}
                   ${LLAMA_GQA}/config.json)
  set_tests_properties(llama_bench_random_tp${np} PROPERTIES LABELS "bench;mpi;llama" TIMEOUT 120)
endforeach()
add_test(NAME llama_bench_random_int8_tp4
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/llama/bench_random.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 4
                 ${LLAMA_GQA}/config.json --weights int8)
add_test(NAME llama_bench_random_bf16_tp2
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/llama/bench_random.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 2
                 ${LLAMA_GQA}/config.json --dtype bf16)
set_tests_properties(llama_bench_random_int8_tp4 llama_bench_random_bf16_tp2 PROPERTIES LABELS "bench;mpi;llama"
                     TIMEOUT 120)
