/* Every field of a request as one table: JSON key, CLI flag, type, range per front end, defaults,
 * help. Both front ends read requests through it: the server's parser (launcher/server/openai.c)
 * takes each field by its key (tp_field_from_json), `tpgen generate` / `tpgen score`
 * (launcher/args.c) each by its flag (tp_field_from_text); tp_request_params_validate checks a
 * built request against the same ranges; the defaults, the CLI's usage line, the 400's `param`
 * and the field tables of docs/SERVING.md and docs/USAGE.md (`tpgen help-params --markdown`,
 * checked by ctest request_fields_docs) all come from it. A range is written once, here, and the
 * same bad value gets the same message from either front end, only the name differing ('top_p'
 * or --top-p). Below launcher/server/ and launcher/, so neither includes upward.
 *
 * A new knob: docs/EXTENDING.md, "A new request knob". */
#ifndef TPGEN_REQUEST_PARAMS_H
#define TPGEN_REQUEST_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "request.h"
#include "util/json.h"

#define TP_MAX_STOP 16    /* stop strings of a request (the server's `stop`, `--stop` repeated) */
#define TP_REQ_MAX_N 16   /* the server's `n` (and best_of): choices per prompt */
#define TP_REQ_API_LOGPROBS 5 /* the server's `logprobs`: OpenAI's limit (the `logprobs` entry says why) */

typedef enum {
    TP_FIELD_INT,     /* an int; a value must be integral (1e2 is 100) */
    TP_FIELD_FLOAT,   /* a float (tp_sampling, the penalties): also 0 or normal once narrowed */
    TP_FIELD_NUMBER,  /* a double (timeout): the range alone */
    TP_FIELD_BOOL,    /* an int, 0 or 1; a CLI flag without a value */
    TP_FIELD_INT64,   /* a uint64_t written as any 64-bit integer, kept exactly (seed) */
    TP_FIELD_STRING,  /* a tp_text: a JSON string, the flag's value */
    TP_FIELD_STRINGS, /* stop: a string or an array of up to TP_MAX_STOP strings; the flag repeated */
    TP_FIELD_PROMPT,  /* the prompt: each front end reads its own forms (openai.c; --prompt, --prompt-ids,
                       * --prompts-file); in the table for its docs row and its place in the order */
    TP_FIELD_REFUSED, /* logit_bias: only null or {} (no bias) is accepted */
} tp_field_type;

/* Which front ends accept a field (tp_field.fronts). */
enum { TP_FRONT_SERVER = 1, TP_FRONT_GENERATE = 2, TP_FRONT_SCORE = 4 };

/* tp_field.flags */
enum {
    TP_FIELD_NEG_OFF = 1,   /* a negative value means "off" and is stored as 0 (vLLM's top_k -1) */
    TP_FIELD_NO_NUL = 2,    /* a string may not hold a NUL character */
    TP_FIELD_NON_EMPTY = 4, /* a string (each of STRINGS) may not be empty */
};

typedef struct {
    double lo, hi; /* [lo, hi], or (lo, hi] with lo_open; an INT64's is every 64-bit integer */
    int lo_open;
} tp_range;

typedef struct {
    const char *s; /* NULL: not given; else s[0..n) (pointing into the JSON tree or argv) */
    size_t n;
} tp_text;

/* A request as a client writes it: the engine's params and the fields the front ends act on
 * themselves. Every table entry names one field here (tp_field.off). */
typedef struct {
    tp_request_params params; /* the engine's knobs (request.h) */
    int n, best_of;           /* the server's choices per prompt; best_of must equal n */
    int stream, echo, include_usage, return_token_ids;
    tp_text model, suffix, user, cache_salt;
    tp_text stop[TP_MAX_STOP];
    int n_stop;
    uint64_t given; /* bit i: tp_fields[i] was given (not absent, not null) */
} tp_request_fields;

typedef struct {
    const char *key;    /* the JSON field of /v1/completions (OpenAI's, or vLLM's extension); "a.b": member
                         * b of object a. NULL: the CLI's alone */
    const char *flag;   /* the CLI flag; NULL: the server's alone */
    const char *arg;    /* the flag's value in usage and docs ("N"); NULL for a BOOL */
    tp_field_type type;
    int fronts;         /* TP_FRONT_*: the front ends that accept it */
    int flags;          /* TP_FIELD_NEG_OFF | TP_FIELD_NO_NUL | TP_FIELD_NON_EMPTY */
    tp_range srv, cli;  /* the range on each front end: one range unless `why` says why they differ */
    double def;         /* the server's default (tp_request_params_default for the engine's knobs) */
    double cli_def;     /* the CLI's default */
    const char *srv_def_doc, *cli_def_doc; /* the docs' default where not the number ("random"); NULL: def */
    size_t off;         /* the field in tp_request_fields */
    tp_request_param id; /* what tp_request_params_validate returns when it is out of range (OK: none) */
    const char *help;   /* one line for both front ends' docs */
    const char *why;    /* why the two ranges or defaults differ (NULL: they do not, or the field is one front end's) */
} tp_field;

extern const tp_field tp_fields[];
extern const int tp_n_fields;

const tp_field *tp_field_by_key(const char *key, size_t len); /* NULL: not in the table */
const tp_field *tp_field_by_flag(const char *flag, int front); /* NULL: not a flag of that front end */
const tp_range *tp_field_range(const tp_field *f, int front);
int tp_field_given(const tp_request_fields *r, const tp_field *f);
const tp_field *tp_field_of(size_t off); /* the entry of a field of tp_request_fields (NULL: none) */
#define TP_FIELD_OF(member) tp_field_of(offsetof(tp_request_fields, member))

/* Every field at front's defaults (TP_FRONT_SERVER: tp_request_params_default's), nothing given. */
tp_request_fields tp_request_fields_default(int front);

/* One pass over a JSON object's members: at[i] the value of tp_fields[i] (the first member of
 * that key, as json_get finds it; a dotted key's is its object's), NULL when absent or null. */
void tp_fields_index(const json_value *obj, const json_value *at[]);

/* The server's reading of f from v (at[i] of tp_fields_index) into r: its type, range and the
 * table's message ("'top_p' expects a number in (0, 1], got 2"). 0, or -1 with the message in
 * err and in param the field the 400 names (the key; for a dotted key its object or its member). */
int tp_field_from_json(const tp_field *f, const json_value *v, tp_request_fields *r, char *param, size_t param_size,
                       char *err, size_t err_size);
/* The CLI's reading of flag's value v (NULL for a BOOL) into r: the same checks and messages,
 * named by the flag. 0, or -1 with the message in err. */
int tp_field_from_text(const tp_field *f, const char *v, tp_request_fields *r, char *err, size_t err_size);

/* A scalar x against f's range on front (integral for INT, 0 or normal as a float for FLOAT):
 * 0, or -1 with the message in err naming the value `name` ("'top_p'", "--top-p"). */
int tp_field_check(const tp_field *f, int front, double x, const char *name, char *err, size_t err_size);
void tp_field_set(const tp_field *f, tp_request_fields *r, double x); /* x checked; NEG_OFF applied */
double tp_field_get(const tp_field *f, const tp_request_fields *r);

/* "[lo, hi]" / "(lo, hi]" of f on front, as the messages write it; "" for a field without one. */
const char *tp_field_range_text(const tp_field *f, int front, char *buf, size_t size);
/* The default of f on front as the docs write it ("16", "false", "random"). */
const char *tp_field_default_text(const tp_field *f, int front, char *buf, size_t size);
/* The usage of front's table flags, "[--max-new-tokens N] [--temperature T] ...", wrapped at
 * width with each new line indented by indent spaces. */
void tp_fields_usage(int front, int indent, int width, char *buf, size_t size);

#endif
