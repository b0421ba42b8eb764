/* tpgen help-params: every request field of the table (engine/sched/request_params.h), as text or
 * as the Markdown tables docs/SERVING.md (--markdown server) and docs/USAGE.md (--markdown
 * generate) hold between their <!-- request_fields ... --> markers; ctest request_fields_docs
 * fails when a doc's block is not what this prints. No MPI, no model. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "sched/request_params.h"

/* the other front end's default and range, where they differ, with why */
static void differs(const tp_field *f, int front, int other, const char *who) {
    char d1[64], d2[64], r1[96], r2[96];
    tp_field_default_text(f, front, d1, sizeof d1);
    tp_field_default_text(f, other, d2, sizeof d2);
    tp_field_range_text(f, front, r1, sizeof r1);
    tp_field_range_text(f, other, r2, sizeof r2);
    if (!f->why || !(f->fronts & TP_FRONT_SERVER) || !(f->fronts & ~TP_FRONT_SERVER)) return;
    printf(" (%s: %s%s%s%s%s; %s)", who, strcmp(d1, d2) ? "default " : "", strcmp(d1, d2) ? d2 : "",
           strcmp(d1, d2) && strcmp(r1, r2) ? ", " : "", strcmp(r1, r2) ? "range " : "", strcmp(r1, r2) ? r2 : "", f->why);
}

static void markdown(int front) {
    int server = front == TP_FRONT_SERVER;
    printf(server ? "| field | default | range | |\n" : "| flag | default | range | meaning |\n");
    printf("| --- | --- | --- | --- |\n");
    for (int i = 0; i < tp_n_fields; i++) {
        const tp_field *f = &tp_fields[i];
        char def[64], range[96];
        if (server ? !(f->fronts & TP_FRONT_SERVER) : !f->flag || !(f->fronts & ~TP_FRONT_SERVER)) continue;
        int cli = server ? TP_FRONT_SERVER : (f->fronts & TP_FRONT_GENERATE ? TP_FRONT_GENERATE : TP_FRONT_SCORE);
        if (server) printf("| `%s` ", f->key);
        else printf("| `%s%s%s`%s ", f->flag, f->arg ? " " : "", f->arg ? f->arg : "",
                    f->type == TP_FIELD_STRINGS ? " (repeatable)" : "");
        printf("| %s | %s | %s", tp_field_default_text(f, cli, def, sizeof def),
               tp_field_range_text(f, cli, range, sizeof range), f->help);
        if (!server && (f->fronts & TP_FRONT_SCORE)) printf("; `generate` and `score`");
        if (!server && f->key) printf("; the server's `%s`", f->key);
        differs(f, cli, server ? TP_FRONT_GENERATE : TP_FRONT_SERVER, server ? "the CLI" : "the server");
        printf(" |\n");
    }
}

static void text(void) {
    for (int i = 0; i < tp_n_fields; i++) {
        const tp_field *f = &tp_fields[i];
        char def[64], range[96];
        printf("%-30s %-22s", f->key ? f->key : "-", f->flag ? f->flag : "-");
        if (f->fronts & TP_FRONT_SERVER)
            printf(" server: default %s %s", tp_field_default_text(f, TP_FRONT_SERVER, def, sizeof def),
                   tp_field_range_text(f, TP_FRONT_SERVER, range, sizeof range));
        if (f->fronts & ~TP_FRONT_SERVER)
            printf(" CLI: default %s %s", tp_field_default_text(f, TP_FRONT_GENERATE, def, sizeof def),
                   tp_field_range_text(f, TP_FRONT_GENERATE, range, sizeof range));
        printf("\n    %s\n", f->help);
    }
}

int tp_cmd_help_params(int argc, char **argv) {
    if (argc == 0) {
        text();
        return 0;
    }
    if (argc == 2 && strcmp(argv[0], "--markdown") == 0 && strcmp(argv[1], "server") == 0) markdown(TP_FRONT_SERVER);
    else if (argc == 2 && strcmp(argv[0], "--markdown") == 0 && strcmp(argv[1], "generate") == 0)
        markdown(TP_FRONT_GENERATE);
    else {
        fprintf(stderr, "tpgen: error: usage: tpgen help-params [--markdown server|generate]\n");
        return 2;
    }
    return 0;
}
