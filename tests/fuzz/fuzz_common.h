/* What the fuzz targets share. Include once, in the target's .c file. */
#ifndef TPGEN_TESTS_FUZZ_COMMON_H
#define TPGEN_TESTS_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"

/* The tokenizer of dir; one that does not load ends the target ("TARGET: the error"). */
static inline tp_tokenizer *fuzz_tokenizer(const char *target, const char *dir) {
    char err[512];
    tp_tokenizer *t = tp_tokenizer_load(dir, err, sizeof err);
    if (!t) {
        fprintf(stderr, "%s: %s\n", target, err);
        abort();
    }
    return t;
}

#endif
