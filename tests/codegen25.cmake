# CodeGen2.5 as published (label codegen25): a checkpoint directory with config.json
# (LlamaForCausalLM, vocab 51200), tokenizer_config.json naming CodeGen25Tokenizer and
# model.safetensors (or pytorch_model.bin), tiny (docs/FIXTURES.md "codegen25-tiny"). Its weights
# (26 MB: the 51,200-row embedding and lm_head) are not committed: the setup test redraws them with
# numpy from a fixed seed (tools/fixtures/make_codegen25_model.py --check) into the build tree, holds their
# sha256 to the one the HF references of tests/data/codegen25-tiny/hf_expected.json were made from,
# and copies those in as expected.json. The tests below read that directory (and its .bin copy),
# against HF's ids and log-probs: parity (check_parity, ids in) at TP 1, 2, 4 (and 2 on the .bin
# copy); `generate --prompt TEXT` (text in, text out) at TP 1, 2, 4 (and 4 on the .bin copy);
# `generate --suffix` (FIM, no fim.json); --speculate ngram; `tokenize`; `info`; --weights int8 and
# --dtype bf16 within the bounds of their parity tests; `serve` at TP 2 (streaming, logprobs,
# prefix cache, KV on demand with preemption, suffix).
# Triton and Slurm cases are in tests/triton.cmake and tests/slurm.cmake (CG25_MODEL, this fixture).
set(CG25_MODEL ${CMAKE_CURRENT_BINARY_DIR}/codegen25-tiny)
set(CG25_BIN ${CMAKE_CURRENT_BINARY_DIR}/codegen25-tiny-bin) # the same weights as pytorch_model.bin
set(CG25_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/codegen25)
add_test(NAME codegen25_model COMMAND python3 ${CMAKE_SOURCE_DIR}/tools/fixtures/make_codegen25_model.py ${CG25_MODEL} --check
                                      --bin ${CG25_BIN})
set_tests_properties(codegen25_model PROPERTIES LABELS "codegen25" TIMEOUT 120 FIXTURES_SETUP codegen25_model)
# weights that are not the ones the references were made from: refused, naming both numpy versions
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/codegen25-other-sha.json
     "{\"weights_sha256\": \"0000\", \"numpy_version\": \"0.0\"}\n")
add_test(NAME codegen25_model_sha_mismatch
         COMMAND sh -c "python3 \"$0\" \"$1\" --check --expected \"$2\" 2>&1; echo \"exit status $?\""
                 ${CMAKE_SOURCE_DIR}/tools/fixtures/make_codegen25_model.py ${CMAKE_CURRENT_BINARY_DIR}/codegen25-other
                 ${CMAKE_CURRENT_BINARY_DIR}/codegen25-other-sha.json)
set_tests_properties(codegen25_model_sha_mismatch PROPERTIES LABELS "codegen25;errors" TIMEOUT 120
  PASS_REGULAR_EXPRESSION "error: .*codegen25-other/model\\.safetensors has sha256 [0-9a-f]+, .*codegen25-other-sha\\.json was made from 0000: numpy [0-9.]+ draws other values from default_rng\\(2525\\) than numpy 0\\.0 did\nexit status 1")

# cg25_test(NAME LABELS TIMEOUT COMMAND...): a test on the regenerated checkpoint
function(cg25_test name labels timeout)
  add_test(NAME codegen25_${name} COMMAND ${ARGN})
  set_tests_properties(codegen25_${name} PROPERTIES LABELS "codegen25;${labels}" TIMEOUT ${timeout}
                       FIXTURES_REQUIRED codegen25_model SKIP_RETURN_CODE 77)
endfunction()

set(CG25_CLI python3 ${CG25_TESTS}/cli_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC})
foreach(np 1 2 4)
  cg25_test(parity_tp${np} "parity;mpi" 120
            check_parity --tpgen $<TARGET_FILE:tpgen> --np ${np} --mpiexec ${TPGEN_MPIEXEC} --fixture ${CG25_MODEL}
            -- --backend cpu --threads 1)
  cg25_test(text_tp${np} "mpi;tokenizer" 120 ${CG25_CLI} ${np} ${CG25_MODEL} text)
endforeach()
# the .bin directory (torch.save's format, as older checkpoints publish it): parity and text
cg25_test(bin_parity_tp2 "parity;mpi" 120
          check_parity --tpgen $<TARGET_FILE:tpgen> --np 2 --mpiexec ${TPGEN_MPIEXEC} --fixture ${CG25_BIN}
          -- --backend cpu --threads 1)
cg25_test(bin_text_tp4 "mpi" 120 ${CG25_CLI} 4 ${CG25_BIN} text)
cg25_test(fim_tp2 "fim;mpi" 60 ${CG25_CLI} 2 ${CG25_MODEL} fim)
cg25_test(speculate_tp2 "speculate;mpi" 120 ${CG25_CLI} 2 ${CG25_MODEL} speculate)
cg25_test(tokenize "tokenizer" 60 ${CG25_CLI} 1 ${CG25_MODEL} tokenize)
cg25_test(info "" 30 $<TARGET_FILE:tpgen> info --model ${CG25_MODEL})
set_tests_properties(codegen25_info PROPERTIES PASS_REGULAR_EXPRESSION
  "architecture: LlamaForCausalLM .*vocab 51200, n_positions 256.*parameters: 6652736 .*  4 +15\\.7 MiB +256 ")
cg25_test(int8_tp1_tp2 "parity;mpi;int8" 200
          ${CMAKE_CURRENT_SOURCE_DIR}/cpu_int8/parity_int8.sh --np 1,2 --build ${CMAKE_BINARY_DIR}
          --fixtures ${CG25_MODEL})
cg25_test(bf16_tp2 "parity;mpi;bf16" 200
          ${CMAKE_CURRENT_SOURCE_DIR}/parity/hf_parity.sh --backend cpu --dtype bf16 --threads 1 --np 2 --tol 0.08
          --mean-tol 0.02 --timeout 120 --build ${CMAKE_BINARY_DIR} --fixtures ${CG25_MODEL})
cg25_test(serve_tp2 "server;prefix;fim;mpi" 240
          python3 ${CG25_TESTS}/serve_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 2 ${CG25_MODEL})

# config.json's eos_token_id 2 (LLaMA's default, "#" here): the tokenizer's <|endoftext|> ends a sequence
cg25_test(eos_from_tokenizer "errors" 60
          bash ${CG25_TESTS}/eos_from_tokenizer.sh $<TARGET_FILE:tpgen> ${CG25_MODEL} ${CMAKE_CURRENT_BINARY_DIR}/codegen25-eos2)
