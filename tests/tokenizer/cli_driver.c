/* Stands in for tpgen's main() in the CLI test while launcher/main.c does not exist: dispatches
 * `tokenize` and `detokenize` to launcher/cmd_tokenize.c as main.c does. */
#include <stdio.h>
#include <string.h>

#include "launcher/commands.h"

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "tokenize") == 0) return tp_cmd_tokenize(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "detokenize") == 0) return tp_cmd_detokenize(argc - 2, argv + 2);
    fprintf(stderr, "usage: %s tokenize|detokenize ...\n", argv[0]);
    return 2;
}
