/* tpgen: one program, several subcommands. The MPI ones (generate, score, bench) run as one
 * rank without mpirun, or N-way tensor parallel under `mpirun -np N` / `srun`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "kernels/backend.h"
#include "util/threads.h"

static const char *USAGE =
    "tpgen - tensor-parallel CodeGen inference\n"
    "usage: tpgen <command> [flags]\n"
    "  generate    generate completions          (mpirun -np N tpgen generate --model DIR --prompt TEXT ...)\n"
    "  score       log-probabilities of ids      (mpirun -np N tpgen score --model DIR --ids 1,2,3 --json)\n"
    "  bench       decode-step benchmark         (tpgen bench --config configs/codegen-350M.json --random-weights)\n"
    "  bench-comm  all-reduce benchmark          (mpirun -np 2 tpgen bench-comm --sizes 8:256M)\n"
    "  serve       OpenAI-compatible server      (mpirun -np N tpgen serve --model DIR --port 8000)\n"
    "  tokenize    text -> ids                   (tpgen tokenize --model DIR --text T [--json])\n"
    "  detokenize  ids -> text                   (tpgen detokenize --model DIR --ids 1,2,3 [--json])\n"
    "  info        build and device facts\n"
    "  help-params every request field: JSON key, flag, range, default (tpgen help-params [--markdown server|generate])\n"
    "run `tpgen <command> --help` for its flags; README.md documents them all\n";

/* This process's rank as the MPI launcher set it, before MPI_Init (0 when not launched by one): an
 * error found before MPI starts, the same on every rank (the environment is), is printed by rank 0
 * alone, as every later error is. */
static int rank_before_mpi(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

int main(int argc, char **argv) {
    /* before anything else: may re-execute (util/threads.h), also to give OpenBLAS the kernels of
     * a CPU it does not know (kernels/cpu/cpu_blas_core.c) */
    char err[512];
    if (tp_threads_env_check(err, sizeof err)) { /* before any OpenMP region, on every rank */
        if (rank_before_mpi() == 0) fprintf(stderr, "tpgen: error: %s\n", err);
        else sleep(5); /* leave after rank 0, so that mpirun does not end rank 0 before it printed */
        return 2;
    }
    tp_threads_env_early(argv, tp_cpu_blas_core_override());
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } table[] = {
        {"generate", tp_cmd_generate}, {"score", tp_cmd_score},         {"bench", tp_cmd_bench},
        {"tokenize", tp_cmd_tokenize}, {"detokenize", tp_cmd_detokenize}, {"info", tp_cmd_info},
        {"bench-comm", tp_cmd_bench_comm},
        {"serve", tp_cmd_serve},       {"help-params", tp_cmd_help_params},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(cmd, table[i].name) == 0) return table[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "tpgen: error: unknown command \"%s\"\n%s", cmd, USAGE);
    return 2;
}
