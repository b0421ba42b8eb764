/* The request's knobs as one table: name, type, range, defaults, OpenAI key, CLI flag, help.
 * Both front ends read it: the server's request parser (launcher/server/openai.c) takes each field it names
 * by its key, `tpgen generate` (launcher/args.c) each by its flag, and tp_request_params_validate
 * checks a built request against the same ranges. A range is written once, here, and the same
 * bad value gets the same message from either front end, only the name differing ('top_p' or
 * --top-p). Below launcher/server/ and launcher/, so neither includes upward. */
#ifndef TPGEN_REQUEST_PARAMS_H
#define TPGEN_REQUEST_PARAMS_H

#include <stddef.h>

#include "request.h"

typedef enum {
    TP_PARAM_INT,   /* an int field; a value must be integral */
    TP_PARAM_FLOAT, /* a float field (tp_sampling, the penalties): also 0 or normal once narrowed */
    TP_PARAM_BOOL,  /* an int field, 0 or 1; a CLI flag without a value */
} tp_param_type;

typedef struct {
    const char *key;      /* the JSON field of /v1/completions (OpenAI's, or vLLM's extension) */
    const char *flag;     /* the `tpgen generate` flag */
    tp_param_type type;
    double lo, hi;        /* the range: [lo, hi], or (lo, hi] with lo_open */
    int lo_open;
    int neg_off;          /* a negative value means "off" and is stored as 0 (vLLM's top_k -1) */
    double def;           /* a request's default (OpenAI's: tp_request_params_default) */
    double cli_def;       /* `tpgen generate`'s default */
    size_t off;           /* the field in tp_request_params */
    tp_request_param id;  /* what tp_request_params_validate returns when it is out of range */
    const char *help;
} tp_param;

extern const tp_param tp_params[];
extern const int tp_n_params;

const tp_param *tp_param_by_key(const char *key, size_t len); /* NULL: not in the table */
const tp_param *tp_param_by_flag(const char *flag);

/* x against p's range (integral for an INT, 0 or normal as a float for a FLOAT): 0, or -1 with
 * the message in err naming the value `name` ("'top_p'", "--top-p"). */
int tp_param_check(const tp_param *p, double x, const char *name, char *err, size_t err_size);
/* The message for a value that is not a number at all: text, as written ("abc"), or a JSON type
 * ("a string"). */
void tp_param_not_a_number(const tp_param *p, const char *name, const char *what, char *err, size_t err_size);
void tp_param_set(const tp_param *p, tp_request_params *r, double x); /* x checked; neg_off applied */
double tp_param_get(const tp_param *p, const tp_request_params *r);

/* Every table field at its CLI default, the rest as tp_request_params_default. */
tp_request_params tp_request_params_cli_default(void);

#endif
