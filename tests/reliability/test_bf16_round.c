/* f32 -> bf16 (kernels/dtype.h, what the bf16 all-reduce and weight conversion use) against
 * torch's conversion of the same bits (tests/reliability/bf16_cases.txt, made by
 * make_bf16_cases.py): round to nearest, ties to even, overflow to inf, NaN stays NaN (torch's
 * NaN bit pattern is not part of the contract, only NaN-ness). Runs on the CPU, so the rounding
 * is tested on machines without a GPU too. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/dtype.h"

static int is_nan_bf16(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_bf16_round CASES.txt\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    char line[128];
    int n = 0, fail = 0, ties = 0, nans = 0, infs = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned in, want;
        if (line[0] == '#' || sscanf(line, "%x %x", &in, &want) != 2) continue;
        float x;
        uint32_t u = in;
        memcpy(&x, &u, 4);
        uint16_t got = tp_f32_to_bf16(x);
        n++;
        ties += (in & 0xffff) == 0x8000 && !isnan(x);
        infs += isinf(x) || (!isnan(x) && isinf(tp_bf16_to_f32(got)));
        if (isnan(x)) {
            nans++;
            if (!is_nan_bf16(got)) {
                printf("FAIL: f32 %08x (NaN) -> bf16 %04x, not a NaN\n", in, got);
                fail++;
            }
        } else if (got != want) {
            printf("FAIL: f32 %08x (%.9g) -> bf16 %04x, torch gives %04x\n", in, x, got, want);
            fail++;
        }
    }
    fclose(f);
    /* the file must hold what this test is about, or it proves nothing */
    if (n < 300 || ties < 10 || nans < 4 || infs < 4) {
        printf("FAIL: %s holds %d cases (%d ties, %d NaN, %d inf): too few\n", argv[1], n, ties, nans, infs);
        return 1;
    }
    printf("%d cases (%d exact ties, %d NaN, %d inf/overflow): %d failed\n", n, ties, nans, infs, fail);
    return fail ? 1 : 0;
}
