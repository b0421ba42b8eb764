#include "ids.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int tp_ids_check(int64_t id, int64_t limit, int pos, const char *where, char *err, size_t err_size) {
    if (id < 0) {
        snprintf(err, err_size, "token id %lld at position %d of %s is negative", (long long)id, pos, where);
        return -1;
    }
    if (id >= limit) {
        snprintf(err, err_size, "token id %lld at position %d of %s is >= vocab_size %lld", (long long)id, pos, where,
                 (long long)limit);
        return -1;
    }
    return 0;
}

int tp_ids_parse_list(const char *s, size_t len, int64_t limit, const char *where, int32_t **ids_out, int *n_out,
                      char *err, size_t err_size) {
    const char *e = s + len;
    int32_t *ids = tp_malloc((len / 2 + 1) * sizeof *ids); /* an id and a comma per two bytes at most */
    int n = 0;
    *ids_out = NULL;
    *n_out = 0;
    while (e > s && e[-1] == ' ') e--;
    while (s < e && *s == ' ') s++;
    if (s == e) {
        snprintf(err, err_size, "%s holds no token ids (an empty prompt; tpgen adds no BOS token)", where);
        goto fail;
    }
    for (;;) {
        while (s < e && *s == ' ') s++;
        if (s >= e || !is_digit(*s)) {
            snprintf(err, err_size, "%s: expected a token id at \"%.20s\" (ids are written 5,17,9)", where,
                     s < e ? s : "<end>");
            goto fail;
        }
        /* the whole digit run, the value saturating: any number >= limit is reported as written */
        const char *start = s;
        int64_t x = 0;
        for (; s < e && is_digit(*s); s++) x = x > limit ? x : x * 10 + (*s - '0');
        if (x >= limit) {
            snprintf(err, err_size, "token id %.*s at position %d of %s is >= vocab_size %lld",
                     (int)(s - start < 40 ? s - start : 40), start, n, where, (long long)limit);
            if (s - start > 40) snprintf(err + strlen(err), err_size - strlen(err), " (%d digits)", (int)(s - start));
            goto fail;
        }
        ids[n++] = (int32_t)x;
        while (s < e && *s == ' ') s++;
        if (s == e) break;
        if (*s++ != ',') {
            snprintf(err, err_size, "%s: expected ',' between token ids at \"%.20s\"", where, s - 1);
            goto fail;
        }
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
fail:
    free(ids);
    return -1;
}
