# Tokenizer tests (label "tokenizer"): HF parity on committed fixtures made by
# tools/fixtures/make_tokenizer_fixtures.py, round trips, fuzz, streaming, truncation, units and the CLI.
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

# tok_test(NAME ARGS...): tokenizer_NAME runs `test_tokenizer ARGS...` (label tokenizer, 120 s)
function(tok_test name)
  add_test(NAME tokenizer_${name} COMMAND test_tokenizer ${ARGN})
  set_tests_properties(tokenizer_${name} PROPERTIES LABELS tokenizer TIMEOUT 120)
endfunction()

tok_test(hf_corpus encode ${TOK_DATA}/codegen ${TOK_DATA}/hf_corpus.jsonl)
tok_test(shared_cases encode ${TOK_DATA}/codegen ${TOK_DATA}/cases.jsonl)
tok_test(hf_decode decode ${TOK_DATA}/codegen ${TOK_DATA}/hf_decode.jsonl)
tok_test(truncate truncate ${TOK_DATA}/hf_truncate.jsonl)
tok_test(json_small encode ${TOK_DATA}/small ${TOK_DATA}/small_corpus.jsonl)
tok_test(json_small_decode decode ${TOK_DATA}/small ${TOK_DATA}/small_decode.jsonl)
tok_test(fuzz fuzz ${TOK_DATA}/codegen 1 3000)
tok_test(unit unit ${TOK_DATA}/codegen ${TOK_DATA}/small ${TOK_TMP})
tok_test(cli cli ${TOK_CLI} ${TOK_DATA} ${TOK_TMP})
# CodeGen2.5 (tokenizer_config.json naming CodeGen25Tokenizer, no vocabulary file): ids equal to
# tiktoken 0.4.0's (tools/fixtures/make_codegen25_fixtures.py) on the shared cases, long space and tab runs,
# token names and random text, by default and as plain text; decode; the id layout, the whitespace
# runs as mergeable ranks (ids measured with tiktoken 0.4.0) and the errors.
tok_test(codegen25 encode ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen25_cases.jsonl)
tok_test(codegen25_plain encode ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen25_plain.jsonl)
tok_test(codegen25_decode decode ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen25_decode.jsonl)
tok_test(codegen25_fuzz fuzz ${TOK_DATA}/codegen25 7 1500)
tok_test(codegen25_unit codegen25 ${TOK_DATA}/codegen25 ${TOK_TMP})
# The FIM prompt (engine/tokenizer/fim.h): CodeGen2's format recognized from CodeGen2's and CodeGen2.5's
# tokenizers without fim.json, prefix and suffix as plain text, an empty suffix; ids from HF
# tokenizers / tiktoken (tools/fixtures/make_fim_fixtures.py).
tok_test(fim fim ${TOK_DATA}/fim_cases.jsonl ${TPGEN_TEST_DATA}/codegen2-f32 ${TOK_DATA}/codegen25 ${TOK_DATA}/codegen
         ${TOK_TMP})
set_tests_properties(tokenizer_fim PROPERTIES LABELS "tokenizer;fim")
# tokenizer_cli starts the tpgen binary ~100 times: ~30 s on an idle machine, 100 s on a loaded one.
set_tests_properties(tokenizer_cli PROPERTIES TIMEOUT 400)
