/* Rank-aware messages and fatal errors.
 *
 * Rank 0 speaks: tp_log0 prints on rank 0 only. Errors name the rank when the job has several.
 * tp_die: an error this rank alone may have seen (I/O, memory): print, then end every rank.
 * tp_die_all: an error every rank reaches with the same inputs (bad flags, config, weights
 * headers): printed once by rank 0, then every rank exits non-zero. The communicator installs
 * the hooks that end the job (MPI_Abort etc.); without them both just exit(1).
 */
#ifndef TPGEN_LOG_H
#define TPGEN_LOG_H

#include <stdarg.h>
#include <stddef.h>

typedef struct {
    void (*die)(void *ctx);     /* end every rank now; does not return */
    void (*die_all)(void *ctx); /* every rank is failing the same way; does not return */
    void *ctx;
} tp_exit_hooks;

void tp_log_set_rank(int rank, int size);
void tp_log_set_exit_hooks(const tp_exit_hooks *hooks);
int tp_log_rank(void);

void tp_log0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* stderr, rank 0 */
void tp_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void tp_die_all(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The message of the tp_die_all in progress ("" if none): a die_all hook that finds this rank
 * failing alone prints it, since rank 0 did not. */
const char *tp_log_die_all_message(void);
/* The message into err (size bytes; nothing when err is NULL), for a function that reports its
 * failure by returning -1: returns -1. */
int tp_set_err(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* malloc/calloc/realloc that die with the size on failure. */
void *tp_malloc(size_t bytes);
void *tp_calloc(size_t n, size_t size);
void *tp_realloc(void *p, size_t bytes);
char *tp_strdup(const char *s);

/* Reads a whole file; NULL (with errno) on failure. *len excludes the added NUL. */
char *tp_read_file(const char *path, size_t *len);

double tp_now_seconds(void); /* monotonic clock */

#endif
