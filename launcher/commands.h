/* The tpgen subcommands; each takes argv after the subcommand name and returns the exit code. */
#ifndef TPGEN_COMMANDS_H
#define TPGEN_COMMANDS_H

int tp_cmd_generate(int argc, char **argv);   /* cmd_generate.c (MPI job) */
int tp_cmd_score(int argc, char **argv);      /* cmd_score.c (MPI job) */
int tp_cmd_tokenize(int argc, char **argv);   /* cmd_tokenize.c (rank 0 only, no MPI) */
int tp_cmd_detokenize(int argc, char **argv); /* cmd_tokenize.c */
int tp_cmd_info(int argc, char **argv);       /* cmd_info.c: build and device facts */
int tp_cmd_bench(int argc, char **argv);      /* cmd_bench.c: decode-step benchmark (MPI job) */
int tp_cmd_bench_comm(int argc, char **argv); /* cmd_bench_comm.c: all-reduce benchmark (MPI job) */
int tp_cmd_serve(int argc, char **argv);      /* cmd_serve.c: the OpenAI-compatible server (MPI job) */
int tp_cmd_help_params(int argc, char **argv); /* cmd_help_params.c: the request fields' table (docs) */

#endif
