/* Turning --prompt / --prompt-ids / --prompts-file into token-id prompts (rank 0). */
#ifndef TPGEN_PROMPTS_H
#define TPGEN_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    int32_t *ids;
    int n;
    int line; /* its line in --prompts-file; 0 for --prompt / --prompt-ids */
} tp_prompt;

/* Returns the number of prompts (in *out), or -1 (and NULL in *out) after printing an error
 * naming the prompt (and file line). tok may be NULL when no text is involved; a text prompt without it is an
 * error. --prompts-file lines: `[1, 2, 3]` (a JSON array of ids), `"..."` (a JSON string, for
 * prompts with newlines), `1,2,3` (ids) or anything else (the line is the text). Empty lines
 * are skipped; an id list with no ids is an error (tpgen adds no BOS token). --prompt-ids is
 * `1,2,3` (spaces around commas allowed; empty items are not). Every id must be < vocab (the
 * model's vocab_size): ids are checked as written, before the weights are read. A
 * --prompts-file is read once (it may be a pipe). */
int tp_prompts_read(const tp_args *a, tp_tokenizer *tok, int64_t vocab, tp_prompt **out);

/* Nonzero when the prompt sources need the tokenizer (text given): for --prompts-file, the
 * number of its first text line. Rank 0 decides (only it needs to read the file). */
int tp_prompts_need_tokenizer(const tp_args *a);

/* "--prompt", "--prompt-ids" or "FILE line N": where prompt p came from, for messages. */
const char *tp_prompt_where(const tp_args *a, const tp_prompt *p, char *buf, size_t size);

#endif
