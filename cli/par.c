/* par — work units over ranks (cli/par.h). */
#include "cli/par.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ODSIM_MPI
#include <mpi.h>

static bool par_mpi;        /* par_init started MPI */
static int par_me, par_n = 1;

int par_init(int *argc, char ***argv)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE")) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "odsim: MPI would not start\n");
        return -1;
    }
    par_mpi = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &par_me);
    MPI_Comm_size(MPI_COMM_WORLD, &par_n);
    return 0;
}

void par_finish(void)
{
    if (par_mpi) MPI_Finalize();
    par_mpi = false;
}

int par_rank(void) { return par_me; }
int par_ranks(void) { return par_n; }

/* A unit's record on the wire: its index and rc, then its result bytes or its error message. */
typedef struct par_head {
    uint64_t unit;
    int64_t rc;
} par_head_t;

enum { PAR_TAG = 36 };

/* The next unit from the counter on rank 0 (values past n: none left). */
static uint64_t take(MPI_Win win)
{
    uint64_t one = 1, got = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Fetch_and_op(&one, &got, MPI_UINT64_T, 0, 0, MPI_SUM, win);
    MPI_Win_unlock(0, win);
    return got;
}

/* Runs unit u into a wire record (header then bytes) or, when even that fails, NULL. */
static char *run_unit(uint64_t u, par_unit_fn fn, void *ctx, size_t *rec_len)
{
    err_t e;
    err_clear(&e);
    char *buf = NULL;
    size_t len = 0;
    par_head_t h = {u, fn((size_t)u, ctx, &buf, &len, &e)};
    const char *body = h.rc ? e.msg : buf;
    size_t body_len = h.rc ? strlen(e.msg) : len;
    char *rec = malloc(sizeof h + body_len);
    if (rec) {
        memcpy(rec, &h, sizeof h);
        if (body_len) memcpy(rec + sizeof h, body, body_len);
        *rec_len = sizeof h + body_len;
    }
    free(buf);
    return rec;
}

/* A wire record of rec_len bytes into its unit's outcome. */
static void keep(const char *rec, size_t rec_len, size_t n, par_out_t *out)
{
    par_head_t h;
    memcpy(&h, rec, sizeof h);
    if (h.unit >= n) return;
    par_out_t *o = &out[h.unit];
    size_t body_len = rec_len - sizeof h;
    o->rc = (int)h.rc;
    if (h.rc) {
        size_t m = body_len < ERR_MSG_MAX - 1 ? body_len : ERR_MSG_MAX - 1;
        memcpy(o->msg, rec + sizeof h, m);
        o->msg[m] = '\0';
    } else if ((o->buf = malloc(body_len ? body_len : 1))) {
        memcpy(o->buf, rec + sizeof h, body_len);
        o->len = body_len;
    } else {
        o->rc = ERR_NOMEM;
        snprintf(o->msg, sizeof o->msg, "out of memory gathering a result of %zu bytes", body_len);
    }
}

static int run_ranks(size_t n, par_unit_fn fn, void *ctx, par_out_t *out, err_t *e)
{
    uint64_t *counter;
    MPI_Win win;
    if (MPI_Win_allocate(par_me ? 0 : sizeof *counter, sizeof *counter, MPI_INFO_NULL, MPI_COMM_WORLD, &counter, &win) != MPI_SUCCESS)
        return err_set(e, ERR_IO, "MPI: cannot make the unit counter");
    if (!par_me) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        *counter = 0;
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = 0;
    size_t mine = 0, n_req = 0;
    MPI_Request *req = par_me ? calloc(n ? n : 1, sizeof *req) : NULL;
    char **recs = par_me ? calloc(n ? n : 1, sizeof *recs) : NULL;
    if (par_me && (!req || !recs)) rc = err_set(e, ERR_NOMEM, "out of memory");
    /* Every rank keeps taking units until none is left, so a rank that cannot send still drains
     * the counter and rank 0 is never left waiting for a unit nobody runs. */
    for (uint64_t u; (u = take(win)) < n;) {
        size_t len = 0;
        char *rec = run_unit(u, fn, ctx, &len);
        if (!par_me) {
            if (rec) keep(rec, len, n, out);
            else {
                out[u].rc = ERR_NOMEM;
                snprintf(out[u].msg, sizeof out[u].msg, "out of memory");
            }
            free(rec);
            mine++;
            continue;
        }
        par_head_t h = {u, ERR_NOMEM};
        if (!rec || rc) { /* still tell rank 0 the unit is settled */
            free(rec);
            rec = malloc(sizeof h);
            if (!rec) abort();
            memcpy(rec, &h, sizeof h);
            len = sizeof h;
        }
        recs[n_req] = rec;
        MPI_Isend(rec, (int)len, MPI_BYTE, 0, PAR_TAG, MPI_COMM_WORLD, &req[n_req]);
        n_req++;
    }
    if (!par_me) {
        for (size_t got = mine; got < n; got++) {
            MPI_Status st;
            int len;
            MPI_Probe(MPI_ANY_SOURCE, PAR_TAG, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &len);
            char *rec = malloc(len ? (size_t)len : 1);
            if (!rec) {
                MPI_Abort(MPI_COMM_WORLD, 1);
                return ERR_NOMEM;
            }
            MPI_Recv(rec, len, MPI_BYTE, st.MPI_SOURCE, PAR_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if ((size_t)len >= sizeof(par_head_t)) keep(rec, (size_t)len, n, out);
            free(rec);
        }
    } else {
        MPI_Waitall((int)n_req, req, MPI_STATUSES_IGNORE);
        for (size_t i = 0; i < n_req; i++) free(recs[i]);
    }
    free(req);
    free(recs);
    MPI_Win_free(&win);
    return rc;
}
#else
int par_init(int *argc, char ***argv) { return 0; }
void par_finish(void) {}
int par_rank(void) { return 0; }
int par_ranks(void) { return 1; }
#endif

int par_run(size_t n, par_unit_fn fn, void *ctx, par_out_t *out, err_t *e)
{
    if (out)
        for (size_t i = 0; i < n; i++) out[i] = (par_out_t){.rc = 1};
#ifdef ODSIM_MPI
    if (par_ranks() > 1) return run_ranks(n, fn, ctx, out, e);
#endif
    for (size_t i = 0; i < n; i++) {
        err_t ue;
        err_clear(&ue);
        out[i].rc = fn(i, ctx, &out[i].buf, &out[i].len, &ue);
        if (out[i].rc) {
            snprintf(out[i].msg, sizeof out[i].msg, "%s", ue.msg);
            break;
        }
    }
    return 0;
}
