/* par — work units over ranks: units 0..n-1 run once each, spread over the ranks of an MPI job
 * (`mpirun -np N odsim ...`), their results gathered on rank 0 in unit order. A plain odsim (not
 * launched by mpirun) is one rank and runs them in order. Units must not depend on the rank that
 * runs them (odsim seeds each point and replication by itself), so outputs do not either.
 *
 * Units are handed out dynamically: a counter on rank 0 that every rank, rank 0 included, takes the
 * next unit from when it is free, so long and short units mix. Built without MPI (make MPI=0) every
 * run is one rank. */
#ifndef ODSIM_CLI_PAR_H
#define ODSIM_CLI_PAR_H

#include <stdbool.h>
#include <stddef.h>
#include "common/err.h"

/* Starts MPI when this process was launched by mpirun (OMPI_COMM_WORLD_SIZE or PMI_SIZE set);
 * otherwise nothing. Call once, first thing in main. Returns 0, or -1 when MPI would not start
 * (with a message on stderr). */
int par_init(int *argc, char ***argv);
/* Ends MPI when par_init started it. Call once, last thing in main. */
void par_finish(void);
/* This process's rank (0 without MPI) and the number of ranks (1 without MPI). */
int par_rank(void);
int par_ranks(void);

/* One unit's outcome on rank 0: its result bytes (rc 0; owned, free with free), or its error. */
typedef struct par_out {
    int rc;        /* 0: done; an ERR_* code: failed (msg says why); 1: not run */
    char *buf;
    size_t len;
    char msg[ERR_MSG_MAX];
} par_out_t;

/* Runs unit i by fn(i, ctx, &buf, &len, e): on success a new byte string of the result. */
typedef int (*par_unit_fn)(size_t i, void *ctx, char **buf, size_t *len, err_t *e);

/* Runs units 0..n-1 over the ranks; every rank calls it with the same n. On rank 0, out[0..n) (n
 * entries, given) receive each unit's outcome. With one rank, units run in order and stop at the
 * first that fails (later ones rc 1, as a serial odsim stops); with several, every unit runs and
 * each failure is kept with its unit. On other ranks out is untouched and may be NULL. Returns 0,
 * or an ERR_* code when the transport failed (e says why). */
int par_run(size_t n, par_unit_fn fn, void *ctx, par_out_t *out, err_t *e);

#endif
