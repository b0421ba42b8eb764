/* tp_die_all reached by one rank alone (an error only that rank saw, e.g. a file its node
 * lacks, reported as if every rank saw it): rank 0 prints nothing, so the failing rank must
 * print the message itself once the bounded wait for the others runs out, then end the job.
 * Run on 2 ranks through tests/errors/expect_error.sh --abort-ok; the other ranks wait in a
 * barrier the way workers wait in a collective. */
#include "comm/comm.h"
#include "util/log.h"

int main(int argc, char **argv) {
    tp_comm *c = tp_comm_mpi_init(&argc, &argv);
    if (c->rank == c->size - 1) tp_die_all("only rank %d saw this error", c->rank);
    c->barrier(c); /* never completes: the last rank is gone */
    tp_comm_finalize(c);
    return 0;
}
