/* Turning --prompt / --prompt-ids / --prompts-file into token-id prompts (rank 0). */
#ifndef TPGEN_PROMPTS_H
#define TPGEN_PROMPTS_H

#include <stdint.h>

#include "args.h"
#include "engine/tokenizer.h"

typedef struct {
    int32_t *ids;
    int n;
} tp_prompt;

/* Returns the number of prompts (in *out), or -1 after printing an error naming the prompt
 * (and file line). tok may be NULL when no text is involved; a text prompt without it is an
 * error. --prompts-file lines: `[1, 2, 3]` (JSON ids), `"..."` (a JSON string, for prompts with
 * newlines), `1,2,3` (ids) or anything else (the line is the text). Empty lines are skipped. */
int tp_prompts_read(const tp_args *a, tp_tokenizer *tok, tp_prompt **out);

/* 1 when the prompt sources need the tokenizer (text given). Same answer on every rank. */
int tp_prompts_need_tokenizer(const tp_args *a);

#endif
