/* Fill-in-the-middle (FIM): the prompt a FIM-capable model infills from, and the token it ends
 * the infill with, as the model's configuration states them (never C literals).
 *
 * The format is a JSON file: the model directory's fim.json, or a file given with --fim (e.g.
 * configs/fim-codegen2.json, CodeGen2's format from its model card):
 *   {"prompt": ["{prefix}", "<mask_1>", "{suffix}", "<|endoftext|>", "<sep>", "<mask_1>"],
 *    "stop_token": "<eom>"}
 * "{prefix}" and "{suffix}" are the request's text, encoded as text; every other item is one
 * token of the tokenizer (an added token), placed by id, so a prefix or suffix holding the text
 * "<sep>" stays text. The ids equal the tokenizer's encoding of the whole FIM string when the
 * prefix and suffix hold no token names (added tokens split text first, as in HF). A model is
 * FIM-capable when a format is found and its tokenizer has every token it names.
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

/* Reads the FIM format: path (--fim) when not NULL, else model_dir/fim.json when it exists.
 * Returns 1 with *f filled, 0 when there is none (the model is not FIM-capable), -1 with a
 * message naming the file and the field, or the token the tokenizer lacks. */
int tp_fim_load(const char *path, const char *model_dir, tp_tokenizer *t, tp_fim *f, char *err, size_t err_size);

/* The FIM prompt's ids (malloc'd, *n of them) for prefix and suffix. 0, or -1 with err. */
int tp_fim_encode(const tp_fim *f, tp_tokenizer *t, const char *prefix, size_t prefix_len, const char *suffix,
                  size_t suffix_len, int32_t **ids, size_t *n, char *err, size_t err_size);

#endif
