# torch.save checkpoints (label bin; the reader unit test is also label loader): the reader on
# files torch wrote, HF parity and byte-identical logits vs safetensors from the .bin copies of
# the fixtures (llama-f32: LlamaForCausalLM) at TP 1, 2, 4, hub names from an HF cache layout, `tpgen info`, bad inputs.
set(BIN_SRC ${CMAKE_CURRENT_SOURCE_DIR}/bin)
set(BIN_TMP ${CMAKE_CURRENT_BINARY_DIR}/bin_tmp)
add_executable(test_bin ${BIN_SRC}/test_bin.c)
target_link_libraries(test_bin PRIVATE tpgen_checkpoint)
add_test(NAME bin_reader COMMAND test_bin ${BIN_TMP}/reader ${BIN_SRC} ${TPGEN_TEST_DATA})
set_tests_properties(bin_reader PROPERTIES LABELS "bin;loader" TIMEOUT 120)

foreach(fixture tiny-f32 rot-full-bf16 llama-f32)
  foreach(np 1 2 4)
    add_test(NAME bin_parity_${fixture}_tp${np}
             COMMAND check_parity --tpgen $<TARGET_FILE:tpgen> --np ${np} --mpiexec ${TPGEN_MPIEXEC}
                     --fixture ${TPGEN_TEST_DATA}/bin/${fixture} -- --backend cpu --threads 1)
    add_test(NAME bin_same_logits_${fixture}_tp${np}
             COMMAND bash ${BIN_SRC}/same_logits.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${np}
                     ${TPGEN_TEST_DATA}/${fixture} ${TPGEN_TEST_DATA}/bin/${fixture})
    set_tests_properties(bin_parity_${fixture}_tp${np} bin_same_logits_${fixture}_tp${np}
                         PROPERTIES LABELS "bin;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300)
  endforeach()
endforeach()

add_test(NAME bin_hub_cache
         COMMAND bash ${BIN_SRC}/hub_cache.sh $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${TPGEN_TEST_DATA} ${BIN_TMP}/hub)
set_tests_properties(bin_hub_cache PROPERTIES LABELS "bin;mpi" TIMEOUT 180)
add_test(NAME bin_info
         COMMAND bash ${BIN_SRC}/info.sh $<TARGET_FILE:tpgen> ${TPGEN_TEST_DATA} ${CMAKE_SOURCE_DIR}/configs)
set_tests_properties(bin_info PROPERTIES LABELS "bin" TIMEOUT 60)

# Bad .bin inputs through the program: one clear error, every rank exits (tests/errors driver).
function(bin_error_test name regex)
  tpgen_expect_error(bin_error_${name} ${regex} LABELS bin errors mpi ARGS ${ARGN})
endfunction()
set(BIN_BAD ${CMAKE_CURRENT_BINARY_DIR}/bin_bad)
foreach(case legacy evil badop nostorage noncontig)
  file(MAKE_DIRECTORY ${BIN_BAD}/${case})
  file(COPY ${TPGEN_TEST_DATA}/tiny-f32/config.json DESTINATION ${BIN_BAD}/${case})
  file(CREATE_LINK ${BIN_SRC}/${case}.bin ${BIN_BAD}/${case}/pytorch_model.bin SYMBOLIC)
endforeach()
bin_error_test(legacy "pytorch_model.bin: a torch checkpoint in the legacy format"
               score --model ${BIN_BAD}/legacy --ids 1,2 --backend cpu --threads 1)
bin_error_test(os_system "refusing to load os.system from .*pytorch_model.bin .*: not a tensor"
               score --model ${BIN_BAD}/evil --ids 1,2 --backend cpu --threads 1)
bin_error_test(opcode "pytorch_model.bin: data.pkl byte [0-9]+: pickle opcode 0x69 \\(INST\\) is not allowed"
               score --model ${BIN_BAD}/badop --ids 1,2 --backend cpu --threads 1)
bin_error_test(missing_storage "pytorch_model.bin: tensor f16: its storage record .*/data/1 is missing"
               score --model ${BIN_BAD}/nostorage --ids 1,2 --backend cpu --threads 1)
bin_error_test(noncontig "tensor transposed: strides \\[1, 3\\] for shape \\[3, 2\\] are not contiguous"
               score --model ${BIN_BAD}/noncontig --ids 1,2 --backend cpu --threads 1)
# Made at configure time: a truncated copy of a fixture, an index naming a missing shard.
file(MAKE_DIRECTORY ${BIN_BAD}/truncated ${BIN_BAD}/missing_shard ${BIN_BAD}/both)
file(COPY ${TPGEN_TEST_DATA}/tiny-f32/config.json DESTINATION ${BIN_BAD}/truncated)
file(COPY ${TPGEN_TEST_DATA}/tiny-f32/config.json DESTINATION ${BIN_BAD}/missing_shard)
execute_process(COMMAND head -c 600000 ${TPGEN_TEST_DATA}/bin/tiny-f32/pytorch_model.bin
                OUTPUT_FILE ${BIN_BAD}/truncated/pytorch_model.bin)
file(WRITE ${BIN_BAD}/missing_shard/pytorch_model.bin.index.json
     "{\"weight_map\": {\"transformer.wte.weight\": \"pytorch_model-00002-of-00002.bin\"}}\n")
bin_error_test(truncated "tpgen: error: .*truncated/pytorch_model.bin: truncated or corrupt zip"
               score --model ${BIN_BAD}/truncated --ids 1,2 --backend cpu --threads 1)
bin_error_test(index_missing_shard
               "missing_shard/pytorch_model-00002-of-00002.bin \\(a shard named by the weight_map of .*pytorch_model.bin.index.json\\): No such file"
               score --model ${BIN_BAD}/missing_shard --ids 1,2 --backend cpu --threads 1)
# Both formats: safetensors is read, and the log says the .bin was not.
foreach(f config.json expected.json model.safetensors)
  file(CREATE_LINK ${TPGEN_TEST_DATA}/tiny-f32/${f} ${BIN_BAD}/both/${f} SYMBOLIC)
endforeach()
file(CREATE_LINK ${BIN_SRC}/evil.bin ${BIN_BAD}/both/pytorch_model.bin SYMBOLIC)
add_test(NAME bin_both_formats
         COMMAND $<TARGET_FILE:tpgen> score --model ${BIN_BAD}/both --ids 1,2 --backend cpu --threads 1)
set_tests_properties(bin_both_formats PROPERTIES LABELS "bin" TIMEOUT 60 PASS_REGULAR_EXPRESSION
  "checkpoint: .*both/model.safetensors \\(safetensors\\); pytorch_model.bin is also there and was not read")
bin_error_test(hub_not_found "Nobody/no-such-model.*not in the Hugging Face cache.*huggingface-cli download Nobody/no-such-model"
               score --model Nobody/no-such-model --ids 1,2 --backend cpu --threads 1)

# The libFuzzer target for the zip parser + unpickler is tests/fuzz/fuzz_bin.c (tests/fuzz.cmake).

# With the CUDA backend and a GPU, `info` sizes the KV cache by GPU 0's free memory and in f16;
# SKIPPED where no GPU is visible.
if(TPGEN_HAVE_CUDA)
  add_test(NAME bin_info_gpu
           COMMAND bash -c "out=$($0 info --model $1) || exit 1; echo \"$out\"; \
grep -q '^cuda devices: [1-9]' <<< \"$out\" || { echo 'SKIPPED: no CUDA GPU'; exit 77; }; \
grep -q 'in f16 (the CUDA backend.s default), .* per rank (free memory of GPU 0)' <<< \"$out\""
                   $<TARGET_FILE:tpgen> ${TPGEN_TEST_DATA}/bin/tiny-f32)
  set_tests_properties(bin_info_gpu PROPERTIES LABELS "bin;gpu" SKIP_RETURN_CODE 77 TIMEOUT 60)
endif()
