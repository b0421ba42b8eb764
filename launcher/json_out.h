/* Writing the JSON lines of rank 0's output. */
#ifndef TPGEN_JSON_OUT_H
#define TPGEN_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void tp_json_string(FILE *f, const char *s, size_t len); /* quoted, escaped; invalid UTF-8 -> U+FFFD */
void tp_json_float(FILE *f, float x);                    /* NaN/inf -> null */
void tp_json_ids(FILE *f, const int32_t *ids, int n);
/* [[id, lp], ...] of the first k with id >= 0, or null when lp of row is NaN and k == 0 */
void tp_json_top(FILE *f, const int32_t *ids, const float *lps, int k);

#endif
