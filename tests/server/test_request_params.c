/* The knobs' table (engine/sched/request_params.h) is well formed and agrees with the request's defaults
 * and checks; then it is printed, one line per knob (key flag type lo hi lo_open), for
 * params_test.py, which sends bad values of every knob to the server and to `tpgen generate`.
 * usage: test_request_params [--list] */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched/request_params.h"

static int fails;
#define CHECK(c, ...)                                                                                                   \
    do {                                                                                                                \
        if (!(c)) {                                                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                                               \
            fputc('\n', stderr);                                                                                        \
            fails++;                                                                                                    \
        }                                                                                                               \
    } while (0)

int main(int argc, char **argv) {
    tp_request_params def = tp_request_params_default(), cli = tp_request_params_cli_default();
    char err[512];
    for (int i = 0; i < tp_n_params; i++) {
        const tp_param *p = &tp_params[i];
        CHECK(p->key && p->flag && strncmp(p->flag, "--", 2) == 0 && p->help, "knob %d: key, --flag and help", i);
        CHECK(p->lo < p->hi, "%s: lo %g < hi %g", p->key, p->lo, p->hi);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(p->key, tp_params[j].key) && strcmp(p->flag, tp_params[j].flag), "%s: key and flag unique",
                  p->key);
        CHECK(tp_param_by_key(p->key, strlen(p->key)) == p && tp_param_by_flag(p->flag) == p, "%s: found", p->key);
        /* the default column is tp_request_params_default's, the CLI's is what the flags start at */
        CHECK(tp_param_get(p, &def) == p->def, "%s: default %g, tp_request_params_default has %g", p->key, p->def,
              tp_param_get(p, &def));
        CHECK(tp_param_get(p, &cli) == p->cli_def, "%s: CLI default %g", p->key, p->cli_def);
        if (p->type == TP_PARAM_BOOL) continue;
        /* both defaults are valid; each end of the range is accepted or refused as written */
        CHECK(tp_param_check(p, p->def, "x", err, sizeof err) == 0, "%s: default %g accepted: %s", p->key, p->def, err);
        CHECK(tp_param_check(p, p->hi, "x", err, sizeof err) == 0, "%s: hi accepted", p->key);
        CHECK((tp_param_check(p, p->lo, "x", err, sizeof err) == 0) == !p->lo_open, "%s: lo %s", p->key,
              p->lo_open ? "refused" : "accepted");
        CHECK(tp_param_check(p, nextafter(p->hi, INFINITY), "'k'", err, sizeof err) && strstr(err, "'k' expects"),
              "%s: above hi refused, named: %s", p->key, err);
        CHECK(tp_param_check(p, NAN, "x", err, sizeof err), "%s: NaN refused", p->key);
        /* what the parser accepts, tp_request_params_validate accepts; what it refuses there, too */
        tp_request_params r = def;
        tp_param_set(p, &r, p->hi);
        if (strcmp(p->key, "min_tokens") == 0) r.max_new_tokens = (int)p->hi; /* min_tokens <= max_tokens */
        CHECK(tp_request_params_validate(&r) == TP_REQ_PARAM_OK, "%s: hi passes validate", p->key);
        tp_param_set(p, &r, p->type == TP_PARAM_INT ? p->hi + 1 : p->hi * 2 + 1);
        CHECK(tp_request_params_validate(&r) == p->id, "%s: above hi fails validate as its own field", p->key);
    }
    if (argc > 1 && strcmp(argv[1], "--list") == 0)
        for (int i = 0; i < tp_n_params; i++) {
            const tp_param *p = &tp_params[i];
            printf("%s %s %s %.17g %.17g %d\n", p->key, p->flag,
                   p->type == TP_PARAM_INT ? "int" : p->type == TP_PARAM_FLOAT ? "float" : "bool", p->lo, p->hi,
                   p->lo_open);
        }
    if (fails) fprintf(stderr, "%d checks failed\n", fails);
    return fails != 0;
}
