/* Helpers shared by the tokenizer tests. */
#ifndef TPGEN_TOK_TEST_H
#define TPGEN_TOK_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "util/json.h"
#include "tokenizer/tokenizer.h"

#define SKIP 77

/* Reads a JSONL file into an array of parsed rows; exits with a message on failure. */
json_value **tt_read_jsonl(const char *path, size_t *n);
void tt_free_jsonl(json_value **rows, size_t n);
/* ids of a JSON array of integers (malloc'd) */
int32_t *tt_json_ids(const json_value *arr, size_t *n);
tp_tokenizer *tt_load(const char *dir);
/* prints "usage: test_tokenizer USAGE" to stderr; returns 2, the status of a bad command line */
int tt_usage(const char *usage);
/* writes content to dir/name; exits with a message on failure */
void tt_write_file(const char *dir, const char *name, const char *content);
/* prints a text shortly and safely: printable ASCII as is, the rest escaped */
void tt_print_text(const char *label, const char *s, size_t n);
void tt_print_ids(const char *label, const int32_t *ids, size_t n);
/* decode of all ids through the streaming decoder (push each, then flush) */
char *tt_stream_decode(const tp_tokenizer *t, const int32_t *ids, size_t n, int skip, size_t *len);
/* an independent UTF-8 check (code points decoded the plain way, overlongs, surrogates and
 * > U+10FFFF refused): offset of the first byte not part of valid UTF-8, or n */
size_t tt_utf8_first_invalid(const unsigned char *s, size_t n);

int tt_cmd_encode(int argc, char **argv);
int tt_cmd_decode(int argc, char **argv);
int tt_cmd_truncate(int argc, char **argv);
int tt_cmd_fuzz(int argc, char **argv);
int tt_cmd_unit(int argc, char **argv);
int tt_cmd_cli(int argc, char **argv);
int tt_cmd_codegen25(int argc, char **argv);
int tt_cmd_fim(int argc, char **argv);

#endif
