# Tokenizer tests (label "tokenizer"): HF parity on committed fixtures made by
# tools/make_tokenizer_fixtures.py, round trips, fuzz, streaming, truncation, units and the CLI.
set(TOK_DATA ${TPGEN_TEST_DATA}/tokenizer)
set(TOK_TMP ${CMAKE_CURRENT_BINARY_DIR}/tokenizer_tmp)
add_executable(test_tokenizer
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/test_tokenizer.c
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/tok_fuzz.c
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/tok_unit.c
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/tok_cli.c
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/tok_codegen25.c
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/tok_fim.c
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/tok_test_util.c)
target_link_libraries(test_tokenizer PRIVATE tpgen_tokenizer)

# The CLI test runs the real `tpgen` (launcher/main.c dispatches to launcher/cmd_tokenize.c).
set(TOK_CLI $<TARGET_FILE:tpgen>)

add_test(NAME tokenizer_hf_corpus
         COMMAND test_tokenizer encode ${TOK_DATA}/codegen ${TOK_DATA}/hf_corpus.jsonl)
add_test(NAME tokenizer_shared_cases
         COMMAND test_tokenizer encode ${TOK_DATA}/codegen ${TOK_DATA}/cases.jsonl)
add_test(NAME tokenizer_hf_decode
         COMMAND test_tokenizer decode ${TOK_DATA}/codegen ${TOK_DATA}/hf_decode.jsonl)
add_test(NAME tokenizer_truncate COMMAND test_tokenizer truncate ${TOK_DATA}/hf_truncate.jsonl)
add_test(NAME tokenizer_json_small
         COMMAND test_tokenizer encode ${TOK_DATA}/small ${TOK_DATA}/small_corpus.jsonl)
add_test(NAME tokenizer_json_small_decode
         COMMAND test_tokenizer decode ${TOK_DATA}/small ${TOK_DATA}/small_decode.jsonl)
add_test(NAME tokenizer_fuzz COMMAND test_tokenizer fuzz ${TOK_DATA}/codegen 1 3000)
add_test(NAME tokenizer_unit
         COMMAND test_tokenizer unit ${TOK_DATA}/codegen ${TOK_DATA}/small ${TOK_TMP})
add_test(NAME tokenizer_cli COMMAND test_tokenizer cli ${TOK_CLI} ${TOK_DATA} ${TOK_TMP})
# CodeGen2.5 (tokenizer_config.json naming CodeGen25Tokenizer, no vocabulary file): ids equal to
# tiktoken 0.4.0's (tools/make_codegen25_fixtures.py) on the shared cases, long space and tab runs,
# token names and random text, by default and as plain text; decode; the id layout, the whitespace
# runs as mergeable ranks (ids measured with tiktoken 0.4.0) and the errors.
add_test(NAME tokenizer_codegen25
         COMMAND test_tokenizer encode ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen25_cases.jsonl)
add_test(NAME tokenizer_codegen25_plain
         COMMAND test_tokenizer encode ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen25_plain.jsonl)
add_test(NAME tokenizer_codegen25_decode
         COMMAND test_tokenizer decode ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen25_decode.jsonl)
add_test(NAME tokenizer_codegen25_fuzz COMMAND test_tokenizer fuzz ${TOK_DATA}/codegen25 7 1500)
add_test(NAME tokenizer_codegen25_unit COMMAND test_tokenizer codegen25 ${TOK_DATA}/codegen25 ${TOK_TMP})
# The FIM prompt (tokenizer/fim.h): CodeGen2's format recognized from CodeGen2's and CodeGen2.5's
# tokenizers without fim.json, prefix and suffix as plain text, an empty suffix; ids from HF
# tokenizers / tiktoken (tools/make_fim_fixtures.py).
add_test(NAME tokenizer_fim COMMAND test_tokenizer fim ${TOK_DATA}/fim_cases.jsonl ${TPGEN_TEST_DATA}/codegen2-f32
                                    ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen ${TOK_TMP})
set_tests_properties(tokenizer_fim PROPERTIES LABELS "tokenizer;fim" TIMEOUT 120)
set_tests_properties(tokenizer_hf_corpus tokenizer_shared_cases tokenizer_hf_decode tokenizer_truncate
                     tokenizer_json_small tokenizer_json_small_decode tokenizer_fuzz tokenizer_unit tokenizer_cli
                     tokenizer_codegen25 tokenizer_codegen25_plain tokenizer_codegen25_decode
                     tokenizer_codegen25_fuzz tokenizer_codegen25_unit
                     PROPERTIES LABELS tokenizer TIMEOUT 120)
# tokenizer_cli starts the tpgen binary ~100 times: ~30 s on an idle machine, 100 s on a loaded one.
set_tests_properties(tokenizer_cli PROPERTIES TIMEOUT 400)
