/* Fill-in-the-middle (FIM): the prompt a FIM-capable model infills from, and the token it ends
 * the infill with.
 *
 * The format, first found of: a JSON file given with --fim, the model directory's fim.json, or
 * the one CodeGen2 and CodeGen2.5 publish on their model cards, recognized from the tokenizer:
 * when it has <mask_1>, <sep>, <eom> and <|endoftext|> as tokens of their own (CodeGen2's
 * tokenizer.json, CodeGen2.5's CodeGen25Tokenizer; CodeGen 1 has none of the first three), the
 * format is configs/fim-codegen2.json's:
 *   {"prompt": ["{prefix}", "<mask_1>", "{suffix}", "<|endoftext|>", "<sep>", "<mask_1>"],
 *    "stop_token": "<eom>"}
 * "{prefix}" and "{suffix}" are the request's text, encoded as plain text
 * (tp_tokenizer_encode_text: a token name typed in the user's code stays text, as HF's
 * split_special_tokens); every other item is one token of the tokenizer, placed by id. The ids
 * equal the tokenizer's encoding of the whole FIM string when the prefix and suffix hold no token
 * names. A model is FIM-capable when a format is found and its tokenizer has every token it names.
 */
#ifndef TPGEN_FIM_H
#define TPGEN_FIM_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

#define TP_FIM_MAX_PARTS 16

typedef struct {
    char path[4096];                /* the file it was read from */
    int n_parts;
    int32_t part_id[TP_FIM_MAX_PARTS]; /* a token id, or -1 / -2 for {prefix} / {suffix} */
    int32_t stop_id;                /* the token that ends the infill */
} tp_fim;

/* Reads the FIM format: path (--fim) when not NULL, else model_dir/fim.json when it exists, else
 * the CodeGen2 format when t has its tokens (f->path then says "built in"). Returns 1 with *f
 * filled, 0 when there is none (the model is not FIM-capable), -1 with a message naming the file
 * and the field, or the token the tokenizer lacks. */
int tp_fim_load(const char *path, const char *model_dir, tp_tokenizer *t, tp_fim *f, char *err, size_t err_size);

/* The FIM prompt's ids (malloc'd, *n of them) for prefix and suffix. 0, or -1 with err. */
int tp_fim_encode(const tp_fim *f, tp_tokenizer *t, const char *prefix, size_t prefix_len, const char *suffix,
                  size_t suffix_len, int32_t **ids, size_t *n, char *err, size_t err_size);

/* The same in two steps, for many prefixes of one suffix (the server encodes the suffix once):
 * encode the suffix with tp_tokenizer_encode_text, then assemble each prompt from the prefix's
 * text and the suffix's ids. tp_fim_tokens: how many ids the format adds to prefix and suffix. */
int tp_fim_assemble(const tp_fim *f, tp_tokenizer *t, const char *prefix, size_t prefix_len, const int32_t *suffix,
                    size_t n_suffix, int32_t **ids, size_t *n, char *err, size_t err_size);
int tp_fim_tokens(const tp_fim *f);

#endif
