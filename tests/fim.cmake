# `suffix` (label fim; engine/tokenizer/fim.h, docs/SERVING.md "Fill-in-the-middle"): FIM end to end on the
# CodeGen2-shaped fixture through the openai client and curl (tests/fim/fim_test.py) at TP 1 and
# 2 and on a copy without fim.json (the format recognized from the tokenizer), token names in
# prefix and suffix kept as text, an empty suffix, a huge suffix refused with rank 0's memory
# bounded, CodeGen 1's 400 and --ignore-suffix, `tpgen generate --suffix`, and the refusals.
set(FIM_FIX ${TPGEN_TEST_DATA}/codegen2-f32)
set(FIM_DIR ${CMAKE_CURRENT_BINARY_DIR}/fim)
foreach(np 1 2)
  add_test(NAME fim_server_tp${np}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/fim/fim_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} ${np}
                   fim ${FIM_FIX})
  set_tests_properties(fim_server_tp${np} PROPERTIES LABELS "fim;server;mpi" TIMEOUT 180
                       FIXTURES_REQUIRED server_deps)
endforeach()
# CodeGen2 as published, without fim.json: the format is recognized from its tokenizer (the same
# checks, and `generate --suffix` below).
set(FIM_NOJSON ${FIM_DIR}/codegen2_no_fim_json)
file(MAKE_DIRECTORY ${FIM_NOJSON})
foreach(f config.json model.safetensors tokenizer.json modeling_codegen.py expected.json)
  file(COPY ${FIM_FIX}/${f} DESTINATION ${FIM_NOJSON})
endforeach()
add_test(NAME fim_server_no_fim_json
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/fim/fim_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                 fim ${FIM_NOJSON})
set_tests_properties(fim_server_no_fim_json PROPERTIES LABELS "fim;server" TIMEOUT 300
                     FIXTURES_REQUIRED server_deps)
add_test(NAME fim_codegen1_suffix
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/fim/fim_test.py $<TARGET_FILE:tpgen> ${TPGEN_MPIEXEC} 1
                 codegen1 ${TPGEN_TEST_DATA}/tiny-f32 ${TPGEN_TEST_DATA}/tokenizer/codegen)
set_tests_properties(fim_codegen1_suffix PROPERTIES LABELS "fim;server" TIMEOUT 180 FIXTURES_REQUIRED server_deps)

# generate --suffix: the reference's infill text, the FIM prompt's ids, finish "stop" at <eom>.
file(READ ${FIM_FIX}/expected.json FIM_EXPECTED)
string(JSON FIM_PREFIX GET ${FIM_EXPECTED} fim prefix)
string(JSON FIM_SUFFIX GET ${FIM_EXPECTED} fim suffix)
string(JSON FIM_TEXT GET ${FIM_EXPECTED} fim text)
string(JSON FIM_PIDS GET ${FIM_EXPECTED} fim prompt_ids)
string(JSON FIM_IDS GET ${FIM_EXPECTED} fim ids)
string(REGEX REPLACE "[][ \n]" "" FIM_PIDS "${FIM_PIDS}")
string(REGEX REPLACE "[][ \n]" "" FIM_IDS "${FIM_IDS}")
add_test(NAME fim_generate_suffix
         COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate --model ${FIM_FIX}
                 --prompt ${FIM_PREFIX} --suffix ${FIM_SUFFIX} --max-new-tokens 20 --backend cpu --threads 1 --json)
set_tests_properties(fim_generate_suffix PROPERTIES LABELS "fim;mpi" TIMEOUT 120)
add_test(NAME fim_generate_suffix_no_fim_json
         COMMAND ${TPGEN_MPIEXEC} ${TPGEN_MPI_FLAGS} -np 2 $<TARGET_FILE:tpgen> generate --model ${FIM_NOJSON}
                 --prompt ${FIM_PREFIX} --suffix ${FIM_SUFFIX} --max-new-tokens 20 --backend cpu --threads 1 --json)
set_tests_properties(fim_generate_suffix_no_fim_json PROPERTIES LABELS "fim;mpi" TIMEOUT 120)
string(REPLACE "," ", " FIM_PIDS_SP "${FIM_PIDS}")
string(REPLACE "," ", " FIM_IDS_SP "${FIM_IDS}")
set_tests_properties(fim_generate_suffix fim_generate_suffix_no_fim_json PROPERTIES
                     PASS_REGULAR_EXPRESSION "\"prompt_ids\": \\[${FIM_PIDS_SP}\\], \"ids\": \\[${FIM_IDS_SP}\\].*\"finish_reason\": \"stop\", \"text\": \"${FIM_TEXT}\"")

# generate --suffix "" (the cursor at the end of the file): the infill prompt with nothing between
# the prefix's <mask_1> and <|endoftext|>, not a plain completion (the ids: HF tokenizers' prefix ids,
# as in expected.json's FIM prompt, then <mask_1> <|endoftext|> <sep> <mask_1>).
add_test(NAME fim_generate_empty_suffix
         COMMAND sh -c "exec \"$0\" generate --model \"$1\" --prompt \"$2\" --suffix '' --max-new-tokens 2 --backend cpu --threads 1 --json"
                 $<TARGET_FILE:tpgen> ${FIM_NOJSON} ${FIM_PREFIX})
set_tests_properties(fim_generate_empty_suffix PROPERTIES LABELS fim TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "\"prompt_ids\": \\[363, 276, 67, 67, 7, 64, 11, 312, 389, 198, 257, 421, 420, 422, 421\\]")

# CodeGen 1 (tiny-f32 with the CodeGen tokenizer): no FIM format.
file(MAKE_DIRECTORY ${FIM_DIR}/codegen1)
file(GLOB FIM_CG1_FILES ${TPGEN_TEST_DATA}/tiny-f32/*.json ${TPGEN_TEST_DATA}/tiny-f32/*.safetensors
     ${TPGEN_TEST_DATA}/tokenizer/codegen/*)
file(COPY ${FIM_CG1_FILES} DESTINATION ${FIM_DIR}/codegen1)

# A FIM format naming a token the tokenizer lacks (<mask_2>), in the model directory.
file(MAKE_DIRECTORY ${FIM_DIR}/no_token)
foreach(f config.json model.safetensors tokenizer.json modeling_codegen.py)
  file(COPY ${FIM_FIX}/${f} DESTINATION ${FIM_DIR}/no_token)
endforeach()
file(WRITE ${FIM_DIR}/no_token/fim.json
     "{\"prompt\": [\"{prefix}\", \"<mask_2>\", \"{suffix}\", \"<|endoftext|>\", \"<sep>\", \"<mask_2>\"], \"stop_token\": \"<eom>\"}\n")
error_test(fim_token_missing_serve "no_token/fim.json: the tokenizer has no token \"<mask_2>\""
           ARGS serve --model ${FIM_DIR}/no_token --port 0 --backend cpu --threads 1)
error_test(fim_token_missing_generate "no_token/fim.json: the tokenizer has no token \"<mask_2>\""
           ARGS generate --model ${FIM_DIR}/no_token --prompt x --suffix y --backend cpu --threads 1)
error_test(fim_generate_codegen1 "--suffix: .*fim/codegen1 has no fill-in-the-middle format"
           ARGS generate --model ${FIM_DIR}/codegen1 --prompt x --suffix y --backend cpu --threads 1)
foreach(t fim_token_missing_serve fim_token_missing_generate fim_generate_codegen1)
  set_tests_properties(errors_${t} PROPERTIES LABELS "errors;fim;mpi")
endforeach()
