/* Fuzz target: launcher/prompts.c, the prompt sources as the user writes them. The first byte
 * picks --prompt-ids (the rest as the flag's value, up to a NUL) or --prompts-file (the rest as
 * the file, through a memfd; text lines are encoded with the small tokenizer.json). Either
 * prompts come back, each holding at least one token id, every id in [0, vocab) (an id becomes an
 * index into the embedding; vocab comes from the first byte's upper bits), or the call fails (-1) after printing an error.
 * Thin on purpose: only tp_prompts_read and the tp_prompt fields are used. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "launcher/prompts.h"
#include "tests/fuzz/fuzz_common.h"

static tp_tokenizer *g_tok;
static int g_fd = -1;
static char g_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_tok = fuzz_tokenizer("fuzz_prompts", TPGEN_FUZZ_TOKENIZER_DATA "/small");
    if ((g_fd = memfd_create("prompts.txt", 0)) < 0) { perror("memfd_create"); abort(); }
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    tp_args a;
    memset(&a, 0, sizeof a);
    char *flag = NULL;
    if (data[0] & 1) {
        if (ftruncate(g_fd, 0) || pwrite(g_fd, data + 1, size - 1, 0) != (ssize_t)(size - 1)) abort();
        a.prompts_file = g_path;
    } else {
        flag = malloc(size);
        memcpy(flag, data + 1, size - 1);
        flag[size - 1] = 0;
        a.prompt_ids = flag;
    }
    tp_prompt *ps = NULL;
    const int64_t vocab = 1 + (int64_t)(data[0] >> 1) * 400;
    int n = tp_prompts_read(&a, g_tok, vocab, &ps);
    for (int i = 0; i < n; i++) {
        if (ps[i].n < 1 || !ps[i].ids) abort();
        for (int j = 0; j < ps[i].n; j++)
            if (ps[i].ids[j] < 0 || ps[i].ids[j] >= vocab) {
                fprintf(stderr, "prompt %d: id %d accepted\n", i, (int)ps[i].ids[j]);
                abort();
            }
    }
    for (int i = 0; i < n; i++) free(ps[i].ids);
    free(ps); /* NULL after a failure */
    free(flag);
    return 0;
}
