/* Every route of the table (launcher/server/routes.c) has its row in docs/SERVING.md's "Routes"
 * table as `METHOD PATH`, and every row there is a route of the table: a route added without
 * its doc entry (or a doc entry left for a route removed) fails this test.
 * usage: test_routes_documented docs/SERVING.md */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/server/route.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SERVING.md\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    /* the "## Routes" section's table rows: | `METHOD PATH` | ... | */
    char line[4096], doc[64][256];
    int n_doc = 0, in = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "## ", 3) == 0) in = strncmp(line, "## Routes", 9) == 0;
        if (!in || strncmp(line, "| `", 3)) continue;
        char *end = strchr(line + 3, '`');
        if (!end || n_doc == 64) continue;
        snprintf(doc[n_doc++], sizeof doc[0], "%.*s", (int)(end - line - 3), line + 3);
    }
    if (fclose(f)) perror(argv[1]);
    if (n_doc == 0) {
        fprintf(stderr, "FAIL: no route rows under \"## Routes\" in %s\n", argv[1]);
        return 1;
    }
    int *seen = calloc((size_t)n_doc, sizeof *seen);
    for (int i = 0; i < srv_n_routes; i++) {
        char want[256];
        snprintf(want, sizeof want, "%s %s", srv_routes[i].method, srv_routes[i].path);
        int found = 0;
        for (int j = 0; j < n_doc; j++)
            if (strcmp(doc[j], want) == 0) found = 1, seen[j] = 1;
        printf("%s %s: %s\n", found ? "ok  " : "FAIL", want, found ? "documented" : "no row `METHOD PATH` in docs/SERVING.md, \"Routes\"");
        bad |= !found;
    }
    for (int j = 0; j < n_doc; j++)
        if (!seen[j]) {
            printf("FAIL %s: documented in \"Routes\" but not a route of launcher/server/routes.c\n", doc[j]);
            bad = 1;
        }
    free(seen);
    printf("%s: %d routes, %d documented\n", bad ? "FAIL" : "ok", srv_n_routes, n_doc);
    return bad;
}
