# 4-bit weights end to end (label int4; the kernels are tests/cpu_int4.cmake's): AWQ and GPTQ
# checkpoints as published (tests/data/int4, tools/fixtures/make.py int4) against HF at TP 1, 2, 4,
# --weights int4 (round-to-nearest at load) the same at every TP size and near f32 on the trained
# tiny model, the loader's unpacking bit for bit, and every bad input refused (label errors).
set(INT4_DATA ${TPGEN_TEST_DATA}/int4)
set(INT4_PARITY ${CMAKE_CURRENT_SOURCE_DIR}/int4/parity_int4.sh)

# The unpacking (AWQ nibble order, GPTQ v1 zeros, group -1 slices) against the fixture maker's
# canonical forms, and a TP 2 rank's column slice against the whole (tests/int4/test_q4_unpack.c).
add_executable(test_q4_unpack ${CMAKE_CURRENT_SOURCE_DIR}/int4/test_q4_unpack.c)
target_link_libraries(test_q4_unpack PRIVATE tpgen_model)
file(GLOB INT4_FIXTURES LIST_DIRECTORIES true ${INT4_DATA}/*)
add_test(NAME int4_unpack COMMAND test_q4_unpack ${INT4_FIXTURES})
set_tests_properties(int4_unpack PROPERTIES LABELS "unit;int4" TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "test_q4_unpack: [0-9]+ checks, 0 failed")

# Each checkpoint against HF (float64 on its dequantized weights) at TP 1, 2, 4 (those its groups
# allow: tests/int4/parity_int4.sh says what is held and the bounds).
foreach(fixture ${INT4_FIXTURES})
  get_filename_component(name ${fixture} NAME)
  add_test(NAME int4_hf_${name} COMMAND ${INT4_PARITY} --checkpoint ${fixture} --np 1,2,4 --build ${CMAKE_BINARY_DIR})
  set_tests_properties(int4_hf_${name} PROPERTIES LABELS "parity;mpi;int4" TIMEOUT 300)
endforeach()
# --weights int4: the same ids and (within the int16 grid of x) log-probabilities at TP 1, 2, 4;
# near HF f32 on the trained tiny model (held), on the random-weight codegen2 fixture (reported).
add_test(NAME int4_rtn_codegen_tiny_py COMMAND ${INT4_PARITY} --rtn ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py
         --group-size 32 --hold-hf --np 1,2,4 --build ${CMAKE_BINARY_DIR})
add_test(NAME int4_rtn_codegen2 COMMAND ${INT4_PARITY} --rtn ${TPGEN_TEST_DATA}/codegen2-f32 --group-size 32
         --np 1,2,4 --build ${CMAKE_BINARY_DIR})
# --lm-head int4: lm_head in 4 bits too, the same ids at every TP size; its distance to HF reported
# (the trained tiny model at g32: mean |d| 0.107, max 0.64, against 0.039 / 0.21 with the int8 lm_head;
# held-out perplexity 42.03 against f32's 41.85, tools/fixtures/eval_tiny.py).
add_test(NAME int4_rtn_lm_head_int4 COMMAND ${INT4_PARITY} --rtn ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py
         --group-size 32 --lm-head int4 --np 1,2,4 --build ${CMAKE_BINARY_DIR})
# --int4-activations int8 (x rounded to int8 per group): within the wider bounds of parity_int4.sh
# on an AWQ LLaMA and a GPTQ CodeGen checkpoint, and RTN on the trained tiny model (HF held).
add_test(NAME int4_hf_awq-llama-g32_a8 COMMAND ${INT4_PARITY} --checkpoint ${INT4_DATA}/awq-llama-g32
         --int4-activations int8 --np 1,2,4 --build ${CMAKE_BINARY_DIR})
add_test(NAME int4_hf_gptq-codegen-asym-g64_a8 COMMAND ${INT4_PARITY} --checkpoint ${INT4_DATA}/gptq-codegen-asym-g64
         --int4-activations int8 --np 1,2 --build ${CMAKE_BINARY_DIR})
add_test(NAME int4_rtn_codegen_tiny_py_a8 COMMAND ${INT4_PARITY} --rtn ${CMAKE_SOURCE_DIR}/models/codegen-tiny-py
         --group-size 32 --hold-hf --int4-activations int8 --np 1,2 --build ${CMAKE_BINARY_DIR})
set_tests_properties(int4_rtn_codegen_tiny_py int4_rtn_codegen2 int4_rtn_lm_head_int4 int4_hf_awq-llama-g32_a8
                     int4_hf_gptq-codegen-asym-g64_a8 int4_rtn_codegen_tiny_py_a8 PROPERTIES LABELS "parity;mpi;int4"
                     TIMEOUT 300)
# --verbose says what was loaded: the checkpoint's method and group, lm_head int8.
add_test(NAME int4_log COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate
         --model ${INT4_DATA}/gptq-llama-asym-row --prompt-ids 1,2,3 --max-new-tokens 2 --backend cpu --threads 1)
set_tests_properties(int4_log PROPERTIES LABELS "int4;mpi" TIMEOUT 90 PASS_REGULAR_EXPRESSION
  "int4 weights.*layers' GEMM weights 4-bit in groups of a row \\(GPTQ \\(checkpoint_format gptq\\), group_size -1\\), lm_head int8")

# --int4-activations int8 says so, and the layers' kernels are the int4a8 ones.
add_test(NAME int4_a8_log COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate
         --model ${INT4_DATA}/awq-llama-g32 --prompt-ids 1,2,3 --max-new-tokens 2 --backend cpu --threads 1
         --int4-activations int8 --verbose)
set_tests_properties(int4_a8_log PROPERTIES LABELS "int4;mpi" TIMEOUT 90 PASS_REGULAR_EXPRESSION
  "cpu int4: 8-bit activations .--int4-activations int8.*int4 8-bit x GEMV")

# Bad input (a ';' of a message is '.' in its regex: cmake would split the list there): one clear error naming config.json's field, the tensor, the flag or the TP sizes;
# every rank exits 1 (tests/errors/expect_error.sh). The bad checkpoints are derived from the
# fixtures by tests/int4/make_bad.py (a fixture setup test).
set(INT4_BAD ${CMAKE_CURRENT_BINARY_DIR}/int4_bad)
add_test(NAME int4_bad_checkpoints COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/int4/make_bad.py ${INT4_BAD})
set_tests_properties(int4_bad_checkpoints PROPERTIES LABELS "errors;int4" TIMEOUT 60 FIXTURES_SETUP int4_bad)
set(INT4_GEN --prompt-ids 1,2 --max-new-tokens 2 --backend cpu --threads 1)
function(int4_error name regex)
  cmake_parse_arguments(E "" "NP" "" ${ARGN})
  if(NOT DEFINED E_NP)
    set(E_NP 2)
  endif()
  tpgen_expect_error(errors_int4_${name} "${regex}" LABELS "errors;mpi;int4" NP ${E_NP} FIXTURE int4_bad
                     ARGS generate ${E_UNPARSED_ARGUMENTS} ${INT4_GEN})
endfunction()
# config.json's quantization_config, refused by field
int4_error(bits8 "int4_bad/bits8/config.json: quantization_config.bits 8 is not supported" --model ${INT4_BAD}/bits8)
int4_error(method "quantization_config.quant_method \"bitsandbytes\" is not supported \\(tpgen reads 4-bit \"awq\" and \"gptq\""
           --model ${INT4_BAD}/method)
int4_error(awq_gemv "quantization_config.version \"gemv\" is not supported: tpgen unpacks AWQ's GEMM packing"
           --model ${INT4_BAD}/awq_gemv)
int4_error(awq_zero_point "quantization_config.zero_point false is not supported" --model ${INT4_BAD}/awq_zero_point)
int4_error(gptq_marlin "quantization_config.checkpoint_format \"marlin\" is not supported" --model ${INT4_BAD}/gptq_marlin)
int4_error(gptq_dynamic "quantization_config.dynamic is not supported" --model ${INT4_BAD}/gptq_dynamic)
int4_error(gptq_lm_head "quantization_config.lm_head true is not supported" --model ${INT4_BAD}/gptq_lm_head)
int4_error(group16 "quantization_config.group_size 16 is not supported: tpgen's 4-bit kernels take groups of a multiple of 32"
           --model ${INT4_BAD}/group16)
# the tensors
int4_error(missing_qzeros "missing tensor model.layers.0.self_attn.q_proj.qzeros in the checkpoint .*int4_bad/missing_qzeros"
           --model ${INT4_BAD}/missing_qzeros)
int4_error(desc_act_gidx "tensor model.layers.0.mlp.down_proj.g_idx in .*: g_idx\\[0\\] = 1, not k / group_size = 0: .*desc_act"
           --model ${INT4_BAD}/desc_act_gidx)
int4_error(act_scales "tensor transformer.h.0.mlp.act.scales in the checkpoint .*: AWQ's scaled activation .* is not supported"
           --model ${INT4_BAD}/act_scales)
int4_error(scales_i32 "tensor model.layers.0.self_attn.q_proj.scales in .* is I32. GPTQ stores it as F16, BF16 or F32"
           --model ${INT4_BAD}/scales_i32)
int4_error(no_quant_config "missing tensor transformer.h.0.attn.qkv_proj.weight .*it holds transformer.h.0.attn.qkv_proj.qweight, 4-bit weights, but config.json has no quantization_config"
           --model ${INT4_BAD}/no_quant_config)
int4_error(mixed_not_convert "model.layers.0.self_attn.q_proj and model.layers.0.self_attn.k_proj: .*modules_to_not_convert keeps one of them in float"
           --model ${INT4_BAD}/mixed_not_convert)
# TP sizes that cut a group: every rank refuses, the valid sizes listed
int4_error(tp_cuts_group "TP=4 cuts the 4-bit groups of out_proj: each rank's 32 of its 128 columns .* group_size \\(config.json quantization_config\\) 64. valid TP sizes: 1, 2"
           NP 4 --model ${INT4_DATA}/gptq-codegen-asym-g64)
int4_error(rtn_tp_cuts_group "--weights int4: TP=2 cuts the 4-bit groups of out_proj: each rank's 32 of its 64 columns .* --group-size 64. valid TP sizes: 1. --group-size values that fit TP=2: 32"
           --model ${TPGEN_TEST_DATA}/tiny-f32 --weights int4 --group-size 64)
int4_error(rtn_default_group "--weights int4: --group-size 128 does not fit n_embd 64, .* valid TP sizes: none. --group-size values that fit TP=2: 32"
           --model ${TPGEN_TEST_DATA}/tiny-f32 --weights int4)
# flags
int4_error(group_size_48 "--group-size 48: must be a multiple of 32" --model ${TPGEN_TEST_DATA}/tiny-f32 --weights int4
           --group-size 48)
int4_error(group_size_alone "--group-size is for --weights int4" --model ${TPGEN_TEST_DATA}/tiny-f32 --group-size 32)
int4_error(lm_head_value "--lm-head must be int8 or int4 .*got \"int2\"" --model ${TPGEN_TEST_DATA}/tiny-f32 --weights int4
           --group-size 32 --lm-head int2)
int4_error(lm_head_alone "--lm-head int4 is for 4-bit weights .--weights int4, or an AWQ / GPTQ checkpoint."
           --model ${TPGEN_TEST_DATA}/tiny-f32 --lm-head int4)
int4_error(lm_head_int8 "--lm-head int4 is for 4-bit weights .*--weights int8 stores lm_head in int8"
           --model ${TPGEN_TEST_DATA}/tiny-f32 --weights int8 --lm-head int4)
int4_error(int4_act_value "--int4-activations must be int16 .* or int8 .*got \"int4\"" --model ${TPGEN_TEST_DATA}/tiny-f32
           --weights int4 --group-size 32 --int4-activations int4)
int4_error(int4_act_alone "--int4-activations int8 is for 4-bit weights .--weights int4, or an AWQ / GPTQ checkpoint."
           --model ${TPGEN_TEST_DATA}/tiny-f32 --weights int8 --int4-activations int8)
int4_error(int8_on_4bit "--weights int8: .*awq-codegen-g32 is a 4-bit checkpoint \\(config.json quantization_config: AWQ \\(GEMM packing\\), group_size 32\\). its weights load as they are"
           --model ${INT4_DATA}/awq-codegen-g32 --weights int8)
int4_error(group_size_on_4bit "--group-size: .*awq-codegen-g32 is a 4-bit checkpoint with its own group_size"
           --model ${INT4_DATA}/awq-codegen-g32 --weights int4 --group-size 64)
int4_error(bf16_rtn "--weights int4 on the CPU runs with f32 activations: it cannot be combined with --dtype bf16"
           --model ${TPGEN_TEST_DATA}/tiny-f32 --weights int4 --group-size 32 --dtype bf16)
int4_error(bf16_4bit "a 4-bit checkpoint \\(quantization_config\\) on the CPU runs with f32 activations: it cannot be combined with --dtype bf16"
           --model ${INT4_DATA}/awq-codegen-g32 --dtype bf16)
# The packed tensors from a torch.save checkpoint (I32 as IntStorage): output byte-identical to the
# safetensors copy's at TP 1 and 2 (tests/bin/same_logits.sh).
foreach(np 1 2)
  add_test(NAME int4_bin_same_logits_tp${np}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bin/same_logits.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${np}
                   ${INT4_DATA}/gptq-codegen-asym-g64 ${TPGEN_TEST_DATA}/bin/int4-gptq-codegen-asym-g64)
  set_tests_properties(int4_bin_same_logits_tp${np} PROPERTIES LABELS "int4;bin;mpi" SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()
# Random weights (bench --random-weights): 4-bit matrices drawn and quantized by the backend, the
# memory plan says so.
add_test(NAME int4_random_bench COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> bench
         --config ${TPGEN_TEST_DATA}/tiny-f32/config.json --random-weights --weights int4 --group-size 32 --batch 1
         --steps 2 --context 8 --prefill 0 --backend cpu --threads 1 --verbose)
set_tests_properties(int4_random_bench PROPERTIES LABELS "int4;mpi" TIMEOUT 120 PASS_REGULAR_EXPRESSION
  "loading random weights.*layers' GEMM weights 4-bit in groups of 32 \\(--weights int4, round-to-nearest\\).*weights .*layer GEMMs int4, lm_head int8.*batch +context")
