/* Private to engine/tokenizer/tokenizer_load.c and the loaders of other tokenizer formats
 * (tokenizer_codegen25.c): what the files say, before tokenizer_load.c builds the tables. The
 * helpers are tokenizer_builder.c's. */
#ifndef TPGEN_TOKENIZER_BUILDER_H
#define TPGEN_TOKENIZER_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "util/json.h"

#define TPK_MAX_ID (1 << 24) /* ids beyond this are surely a broken file */

typedef struct {
    int32_t id;
    char *content;
    size_t len;
    int special, normalized;
    int control; /* TPK_TOK_CONTROL: left as text by plain-text encoding */
} added_tok;

typedef struct {
    const char *dir;
    char *err;
    size_t err_size;
    /* model vocab: the string of each id, in the GPT-2 alphabet; strings point into the parsed
     * documents below, which live until the tables are built */
    const char **vstr; /* [vcap] NULL when the id has no vocab string */
    size_t *vlen;   /* [vcap] */
    int32_t vcap, max_id;
    added_tok *added;
    int n_added, cap_added;
    /* merges as strings (pointing into merges_text or the documents), in rank order */
    const char **mleft, **mright;
    size_t *mleft_len, *mright_len;
    int *mline; /* line (merges.txt) or index (tokenizer.json) of each merge, for messages */
    int n_merges, cap_merges;
    const char *merges_file;
    int ignore_merges;
    json_value *docs[2]; /* vocab.json or tokenizer.json, kept while vstr/mleft point into them */
    char *merges_text;
    char *owned;  /* vocab strings made here (CodeGen2.5's ranks in the alphabet), freed with b */
    int tiktoken; /* CodeGen2.5: tiktoken's BPE (merges from the vocab, ranked by id) and its classes */
} builder;

void tpk_errf(builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tpk_file_exists(const char *dir, const char *name);
void tpk_path_join(char *out, size_t size, const char *dir, const char *name); /* "dir/name" */
int32_t tpk_vocab_find(const builder *b, const char *s, size_t n);              /* its id, or -1 */
json_value *tpk_read_json(builder *b, const char *name); /* DIR/name parsed; NULL with err set */
/* the vocab string (GPT-2 alphabet) of id; -1 with err naming file when id is taken or invalid */
int tpk_vocab_put(builder *b, const char *file, const char *s, size_t n, long long id);
/* Adds (or updates) an added token (control = special). id < 0: the vocab's id for it, else a new id after all. */
void tpk_added_put(builder *b, const char *s, size_t n, int32_t id, int special, int normalized);
added_tok *tpk_added_find(builder *b, const char *s, size_t n);
/* the GPT-2 alphabet string of byte c (1 or 2 UTF-8 bytes) into out; its length */
int tpk_alpha_char(uint8_t c, char out[2]);
/* the alphabet's tables, made once (tpk_alpha_char and tpk_alpha_decode call it too) */
void tpk_alphabet_init(void);
/* a string of alphabet characters -> its bytes (out: room for n); 0 when a character is not in
 * the alphabet */
int tpk_alpha_decode(const char *s, size_t n, uint8_t *out, size_t *out_n);

/* CodeGen2.5 (tokenizer_codegen25.c): 1 when DIR/tokenizer_config.json names CodeGen25Tokenizer;
 * 0 when it names another class (*cls the class, or "(none)"); -1 when it cannot be read (err). */
int tpk_codegen25_identify(builder *b, char *cls, size_t cls_size);
/* Fills b with CodeGen2.5's tokenizer: GPT-2's ranks from gpt2.tiktoken and its special tokens. */
int tpk_codegen25_read(builder *b, char **eos, size_t *eos_len);

#endif
