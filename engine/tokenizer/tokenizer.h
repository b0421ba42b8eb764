/* The CodeGen tokenizer: GPT-2 byte-level BPE plus CodeGen's added whitespace tokens, giving the
 * same ids as HF's fast CodeGen tokenizer (tokenizers' Tokenizer) on any valid UTF-8 text; and
 * CodeGen2.5's, giving the ids of its tiktoken 0.4.0 encoding.
 * Used on rank 0 only. See docs/TOKENIZER.md for the exact behaviour and the choices made.
 *
 * Encoding runs: 1. split on added tokens (leftmost-longest; first the non-normalized ones such as
 * <|endoftext|>, then the normalized ones such as CodeGen's space/tab runs), 2. the GPT-2
 * pre-tokenizer regex on each remaining piece (hand-written; Unicode classes from a table
 * generated from HF's own regex engine), 3. BPE by merge rank on bytes, with a word cache.
 *
 * A tp_tokenizer is not thread-safe: encode updates its word cache. Decoding is const.
 */
#ifndef TPGEN_TOKENIZER_H
#define TPGEN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tp_tokenizer tp_tokenizer;

/* 1 when dir holds tokenizer files (tokenizer.json, vocab.json + merges.txt, or a
 * tokenizer_config.json, whose class tp_tokenizer_load identifies or refuses). */
int tp_tokenizer_present(const char *dir);
/* Loads from a model dir; NULL with a message naming the file in err on failure.
 * tokenizer.json is used when present (as HF does), else vocab.json + merges.txt with
 * added_tokens.json, special_tokens_map.json and tokenizer_config.json when present, else the
 * class tokenizer_config.json names: CodeGen2.5's CodeGen25Tokenizer (tiktoken's encoding, built
 * from the GPT-2 ranks tpgen ships; docs/TOKENIZER.md), any other class an error naming it. */
tp_tokenizer *tp_tokenizer_load(const char *dir, char *err, size_t err_size);
void tp_tokenizer_free(tp_tokenizer *t);
/* Encodes UTF-8 text. Returns 0 and a malloc'd array in *ids (count *n); -1 with a message in err
   (e.g. invalid UTF-8 at byte offset N). */
int tp_tokenizer_encode(tp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                        size_t err_size);
/* As tp_tokenizer_encode, with the text as plain text: a control token's name (<|endoftext|>,
 * <sep>, <mask_1>, ...: HF's special tokens; CodeGen2.5's tiktoken special tokens, whose space
 * and tab runs are ordinary BPE tokens) is encoded as the characters it is made of, as HF's split_special_tokens does.
 * Used for the user's code in a FIM prompt (engine/tokenizer/fim.h). */
int tp_tokenizer_encode_text(tp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                             size_t err_size);
/* Decodes ids to a malloc'd NUL-terminated byte string (*len bytes). Ids out of range: -1 + err.
 * The result is always valid UTF-8: byte sequences that are not (a lone byte token of a
 * multi-byte character) become U+FFFD, one per maximal invalid subpart, as HF does. */
int tp_tokenizer_decode(const tp_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                        size_t *len, char *err, size_t err_size);
/* As tp_tokenizer_decode, for the ids a model makes: CodeGen pads its vocabulary past the
 * tokenizer's (vocab_size 51,200, 50,295 tokens), so an id in [0, model_vocab) that no token has
 * decodes to nothing, as HF's decode does (the server's completion text skips it too); only an
 * id < 0 or >= model_vocab is an error. model_vocab <= 0: the tokenizer's size. */
int tp_tokenizer_decode_model(const tp_tokenizer *t, int32_t model_vocab, const int32_t *ids, size_t n,
                              int skip_special, char **text, size_t *len, char *err, size_t err_size);
int tp_tokenizer_vocab_size(const tp_tokenizer *t); /* including added tokens */
/* The most bytes of text one token stands for: a text of len bytes encodes to at least
 * len / this many ids (every byte belongs to one token), so a text that cannot fit a context
 * can be refused before it is encoded. */
size_t tp_tokenizer_max_token_bytes(const tp_tokenizer *t);

/* Incremental decoder for streaming: push one id, get the newly completed UTF-8 text (never half a char). */
typedef struct tp_detok_stream tp_detok_stream;
tp_detok_stream *tp_detok_stream_new(const tp_tokenizer *t, int skip_special);
/* Appends the newly completed bytes to *out (malloc'd, NUL-terminated, *out_len) — may be empty.
 * *out may be NULL on the first call; it grows across calls (the caller frees it). Returns 0, or
 * -1 for an id out of range (nothing appended). */
int tp_detok_stream_push(tp_detok_stream *s, int32_t id, char **out, size_t *out_len);
/* At the end of the stream: appends U+FFFD if an unfinished UTF-8 character is pending, so that
 * everything pushed + flushed equals tp_tokenizer_decode of all ids. Returns 0. */
int tp_detok_stream_flush(tp_detok_stream *s, char **out, size_t *out_len);
void tp_detok_stream_free(tp_detok_stream *s);

/* CodeGen's truncate-before-pattern option: returns the length of the prefix of `completion` to keep. */
size_t tp_tokenizer_truncate(const char *completion, size_t len, const char *const *patterns, int n_patterns);
/* Compiles each pattern (PCRE2, multiline, UTF); -1 with the pattern and the reason in err when one
 * is not a valid regex (tp_tokenizer_truncate ignores such a pattern). */
int tp_tokenizer_truncate_check(const char *const *patterns, int n_patterns, char *err, size_t err_size);

/* Token facts. tp_tokenizer_token_bytes: the bytes an id decodes to (not NUL-terminated), NULL for
 * an id out of range or without a token. */
const char *tp_tokenizer_token_bytes(const tp_tokenizer *t, int32_t id, size_t *len);
int tp_tokenizer_is_special(const tp_tokenizer *t, int32_t id);
int32_t tp_tokenizer_eos_id(const tp_tokenizer *t); /* <|endoftext|> (or the eos_token), -1 if none */

/* Stop strings on a stream of decoded text (for `generate --stop`): feed each newly decoded chunk;
 * the matcher appends to *out only text that can no longer be the start of a stop string, and
 * returns 1 once a stop string has appeared (the text before it is all emitted, the stop string
 * itself never is). After the stream ends without a stop, tp_stop_matcher_finish releases the text
 * held back. */
typedef struct tp_stop_matcher tp_stop_matcher;
tp_stop_matcher *tp_stop_matcher_new(const char *const *stops, int n_stops);
/* The same on strings the caller keeps alive until tp_stop_matcher_free: one copy of the stop
 * strings for every sequence of a server request (n x prompts matchers). */
tp_stop_matcher *tp_stop_matcher_new_shared(const char *const *stops, int n_stops);
int tp_stop_matcher_feed(tp_stop_matcher *m, const char *text, size_t len, char **out, size_t *out_len);
void tp_stop_matcher_finish(tp_stop_matcher *m, char **out, size_t *out_len);
void tp_stop_matcher_free(tp_stop_matcher *m);

/* Appends [s, s + n) to the malloc'd, NUL-terminated *out (NULL: allocated; the caller frees). */
void tp_text_append(char **out, size_t *out_len, const char *s, size_t n);

/* One generated sequence's text, the pipeline every front end runs (`tpgen generate`, the
 * server): tp_detok_stream (no half UTF-8 character, special tokens skipped), then, with stop
 * strings, tp_stop_matcher (text that may still start a stop string held back). */
typedef struct tp_text_stream tp_text_stream;
/* stops: n_stops strings (0: none); shared: they stay the caller's until tp_text_stream_free
 * (tp_stop_matcher_new_shared), else copied. */
tp_text_stream *tp_text_stream_new(const tp_tokenizer *t, const char *const *stops, int n_stops, int shared);
/* Pushes one generated id: appends the text that became final to *out (tp_text_append) and sets
 * *decoded (may be NULL) to the bytes the detokenizer released for it (the text offsets of the
 * tokens). Returns 1 once a stop string has matched (the text before it is out, the stop string
 * never is); the stream takes no more text then. */
int tp_text_stream_push(tp_text_stream *s, int32_t id, char **out, size_t *out_len, size_t *decoded);
/* The sequence ended (not at a stop string: then a no-op): appends what was held back, a
 * pending partial UTF-8 character as U+FFFD, then the text that might have begun a stop string. */
void tp_text_stream_finish(tp_text_stream *s, char **out, size_t *out_len, size_t *decoded);
int tp_text_stream_stopped(const tp_text_stream *s);
void tp_text_stream_free(tp_text_stream *s);

#endif
