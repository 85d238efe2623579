/* plan_replay — a built-in method's plan as a replay workload (cli/plan_replay.h). */
#include "cli/plan_replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomicio.h"
#include "models/hwinst.h"
#include "models/opkind.h"

#define NONE UINT32_MAX
#define MAX_CALL_PIECES 256     /* pieces of a copy made of one API call each */
#define MAX_PIECE_BYTES (256ull << 20)

typedef struct build {
    const plan_replay_in_t *in;
    rf_session_t *s;
    plan_replay_note_t *note;
    err_t *e;
    cost_t quiet;               /* the plan's forms, noting nothing in the profile */
    cost_paths_t paths;
    uint32_t *rid;              /* per plan op: the replay id of its last replay op (NONE: none) */
    double want_span[RF_MAX_OPS];
} build_t;

static uint32_t fold(uint32_t stream) { return stream % RF_MAX_STREAMS; }

/* A new replay op of kind on stream, or NULL with e set when the session is full. */
static rf_op_t *emit(build_t *b, uint32_t plan_op, int kind, uint32_t stream)
{
    if (b->s->n_ops == RF_MAX_OPS) {
        err_set(b->e, ERR_RANGE, "the plan needs more than %d replay ops (at plan op %u of %u): a replay session "
                "holds at most %d", RF_MAX_OPS, plan_op, b->in->plan->n_ops, RF_MAX_OPS);
        return NULL;
    }
    rf_op_t *o = &b->s->ops[b->s->n_ops];
    memset(o, 0, sizeof *o);
    o->kind = (rf_kind_t)kind;
    o->stream = kind == RF_OP_SYNC || kind == RF_OP_HOST ? 0 : fold(stream);
    b->want_span[b->s->n_ops] = 0;
    b->note->source[b->s->n_ops] = plan_op;
    b->rid[plan_op] = b->s->n_ops++;
    return o;
}

static int cmp_desc(const void *a, const void *c)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)c;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Plan op i's dependencies the replay must state: the last replay ops of its predecessors on other
 * (folded) streams, the 8 latest; *gpu_deps says whether it has any on the GPU at all. */
static uint32_t after_of(build_t *b, uint32_t i, uint32_t *after, bool *gpu_deps)
{
    const plan_t *p = b->in->plan;
    const plan_op_t *o = &p->ops[i];
    uint32_t ids[64], n = 0;
    *gpu_deps = false;
    for (uint32_t k = 0; k < o->n_deps; k++) {
        uint32_t d = p->deps[o->dep_first + k];
        const plan_op_t *q = &p->ops[d];
        if (q->exec == PLAN_EXEC_CPU || b->rid[d] == NONE) continue;   /* done on the host already */
        *gpu_deps = true;
        if (o->exec != PLAN_EXEC_CPU && fold(q->stream) == fold(o->stream)) continue;   /* in stream order */
        bool seen = false;
        for (uint32_t j = 0; j < n; j++) seen |= ids[j] == b->rid[d];
        if (!seen && n < sizeof ids / sizeof *ids) ids[n++] = b->rid[d];
    }
    qsort(ids, n, sizeof *ids, cmp_desc);
    if (n > RF_MAX_AFTER) {
        b->note->after_dropped += n - RF_MAX_AFTER;
        n = RF_MAX_AFTER;
    }
    for (uint32_t j = 0; j < n; j++) after[j] = ids[n - 1 - j];
    return n;
}

/* The power of two nearest x, within [16, 256 MiB]. */
static uint64_t pow2_near(double x)
{
    uint64_t lo = 16;
    while (lo < MAX_PIECE_BYTES && (double)lo * 2 <= x) lo *= 2;
    return lo < MAX_PIECE_BYTES && x - (double)lo > (double)lo * 2 - x ? lo * 2 : lo;
}

/* A transfer of plan op i: `bytes` in about `pieces` pieces, at most max_pieces of them (the piece
 * size doubles until they fit), its pieces within span_bytes of the region (0: its own bytes). */
static int transfer(build_t *b, uint32_t i, int kind, double bytes, double pieces, uint64_t max_pieces,
                    double span_bytes, rf_op_t **out)
{
    uint64_t B = pow2_near(bytes / fmax(pieces, 1.0)), P = (uint64_t)fmax(1.0, llround(bytes / (double)B));
    bool coarsened = false;
    while (P > max_pieces && B < MAX_PIECE_BYTES) {
        B *= 2;
        P = (uint64_t)fmax(1.0, llround(bytes / (double)B));
        coarsened = true;
    }
    if (P > max_pieces || (double)P * B > RF_MAX_REGION_BYTES)
        return err_set(b->e, ERR_RANGE, "plan op %u (%s): %.0f bytes in %.0f pieces do not fit a replay transfer "
                       "(at most %llu pieces of at most 256 MiB within 64 GiB)", i, opkind_name(b->in->plan->ops[i].kind),
                       bytes, pieces, (unsigned long long)max_pieces);
    if (coarsened && kind == RF_OP_D2H) b->note->d2h_coarsened++;
    rf_op_t *o = emit(b, i, kind, b->in->plan->ops[i].stream);
    if (!o) return ERR_RANGE;
    o->pieces = P;
    o->piece_bytes = B;
    b->want_span[b->s->n_ops - 1] = fmax((double)(P * B), kind == RF_OP_H2D2D ? 0 : span_bytes);
    *out = o;
    return ERR_OK;
}

/* GEMMs of m × n × k in parts of at most 65536 along m and n, on one stream. */
static int gemms(build_t *b, uint32_t i, double m, double n, double k, rf_op_t **first)
{
    if (k > RF_MAX_GEMM_DIM || m < 1 || n < 1 || k < 1)
        return err_set(b->e, ERR_RANGE, "plan op %u (%s): a GEMM of m %.0f, n %.0f, k %.0f is beyond a replay gemm "
                       "(k at most %d)", i, opkind_name(b->in->plan->ops[i].kind), m, n, k, RF_MAX_GEMM_DIM);
    double mp = ceil(m / RF_MAX_GEMM_DIM), np = ceil(n / RF_MAX_GEMM_DIM);
    *first = NULL;
    for (double a = 0; a < mp; a++)
        for (double c = 0; c < np; c++) {
            rf_op_t *o = emit(b, i, RF_OP_GEMM, b->in->plan->ops[i].stream);
            if (!o) return ERR_RANGE;
            o->m = (uint64_t)(floor(m * (a + 1) / mp) - floor(m * a / mp));
            o->n = (uint64_t)(floor(n * (c + 1) / np) - floor(n * c / np));
            o->k = (uint64_t)k;
            if (!*first) *first = o;
        }
    return ERR_OK;
}

typedef struct gemm_shape {
    double k, n;
} gemm_shape_t;

/* A GEMM or LM head op: the model's projections where its FLOPs are theirs (QKV; O, MLP up with
 * gate, MLP down; the LM head), else one shape of its bytes (k·n = bytes / 2) and FLOPs. */
static int gemm_op(build_t *b, uint32_t i, rf_op_t **first)
{
    const plan_op_t *o = &b->in->plan->ops[i];
    const llm_t *L = b->in->llm;
    double h = L->hidden, qd = (double)L->q_heads * L->head_dim, kvd = (double)L->kv_heads * L->head_dim;
    double m = o->kind == OPKIND_LM_HEAD ? 1 : fmax(1.0, b->in->plan->tokens), params = o->flops / (2.0 * m);
    const gemm_shape_t qkv[] = {{h, qd + 2 * kvd}}, omlp[] = {{qd, h}, {h, 2.0 * L->ffn}, {L->ffn, h}},
                       head[] = {{h, L->vocab}};
    const gemm_shape_t *shape = NULL;
    int parts = 0;
    if (o->kind == OPKIND_LM_HEAD && fabs(params - h * L->vocab) <= 1e-9 * params) shape = head, parts = 1;
    else if (fabs(params - h * (qd + 2 * kvd)) <= 1e-9 * params) shape = qkv, parts = 1;
    else if (fabs(params - (qd * h + 3.0 * h * L->ffn)) <= 1e-9 * params) shape = omlp, parts = 3;
    if (!shape) {
        b->note->gemm_from_flops++;
        double kn = fmax(1.0, round(o->bytes_hbm / 2.0)), k = fmin(RF_MAX_GEMM_DIM, fmax(1.0, round(sqrt(kn))));
        return gemms(b, i, fmax(1.0, round(o->flops / (2.0 * kn))), fmax(1.0, round(kn / k)), k, first);
    }
    *first = NULL;
    for (int j = 0; j < parts; j++) {
        rf_op_t *f;
        int rc = gemms(b, i, m, shape[j].n, shape[j].k, &f);
        if (rc) return rc;
        if (!*first) *first = f;
    }
    return ERR_OK;
}

/* Any other kernel: an hbm read of its bytes and a spin of the rest of its time alone, or a spin of
 * it all where reading its bytes from HBM would take longer than it does. */
static int kernel_op(build_t *b, uint32_t i, rf_op_t **first)
{
    const plan_op_t *o = &b->in->plan->ops[i];
    sim_ps_t t_op, t_hbm = 0;
    int rc = plan_op_alone_ps(o, b->in->sim, &t_op, b->e);
    if (rc) return rc;
    double bytes = fmin(o->bytes_hbm, (double)RF_MAX_REGION_BYTES);
    if (bytes >= 1) {
        plan_op_t h;
        memset(&h, 0, sizeof h);
        cost_kernel(&b->quiet, &b->paths, OPKIND_HBM_STREAM, bytes, 0, LLM_BF16, &h);
        rc = plan_op_alone_ps(&h, b->in->sim, &t_hbm, b->e);
        if (rc) return rc;
    }
    *first = NULL;
    if (bytes >= 1 && t_hbm <= t_op) {
        rf_op_t *x = emit(b, i, RF_OP_HBM, o->stream);
        if (!x) return ERR_RANGE;
        x->bytes = (uint64_t)llround(bytes);
        *first = x;
        t_op -= t_hbm;
    }
    uint64_t us = (uint64_t)llround((double)t_op / 1e6);
    if (*first && us < 1) return ERR_OK;
    rf_op_t *x = emit(b, i, RF_OP_SPIN, o->stream);
    if (!x) return ERR_RANGE;
    x->us = us;
    b->note->spins++;
    if (!*first) *first = x;
    return ERR_OK;
}

/* The replay op(s) of plan op i. */
static int map_op(build_t *b, uint32_t i)
{
    const plan_op_t *o = &b->in->plan->ops[i];
    uint32_t after[RF_MAX_AFTER];
    bool gpu_deps;
    uint32_t n_after = after_of(b, i, after, &gpu_deps);
    bool sync = o->host_sync || (o->exec == PLAN_EXEC_CPU && gpu_deps);
    uint32_t last = b->s->n_ops ? b->s->n_ops - 1 : NONE;
    if (sync && !(last != NONE && b->s->ops[last].kind == RF_OP_SYNC)) {
        if (!emit(b, i, RF_OP_SYNC, 0)) return ERR_RANGE;
    }
    if (sync) n_after = 0;   /* the sync waited for everything issued */
    double span = b->in->span_bytes ? b->in->span_bytes[i] : 0;
    rf_op_t *first = NULL;
    int rc = ERR_OK;
    if (o->exec == PLAN_EXEC_CPU) {
        sim_ps_t t;
        rc = plan_op_alone_ps(o, b->in->sim, &t, b->e);
        if (!rc) first = emit(b, i, RF_OP_HOST, 0);
        if (first) first->us = (uint64_t)llround((double)(t + o->launch_ps) / 1e6);
        else if (!rc) rc = ERR_RANGE;
        return rc;
    }
    if (o->exec == PLAN_EXEC_COPY_D2H) {
        rc = transfer(b, i, RF_OP_D2H, o->bytes_host, o->pieces, MAX_CALL_PIECES, span, &first);
    } else if (o->exec == PLAN_EXEC_COPY_H2D) {
        /* odsim's batched form where the host issues the copy after a sync (winners, per-query
         * planes) or the kind says so; else its one-copy form: a 2D copy of the pieces as rows */
        int kind = o->kind == OPKIND_H2D_BATCH || (o->host_sync && o->kind != OPKIND_H2D_COPY2D) ? RF_OP_H2DBATCH
                                                                                               : RF_OP_H2D2D;
        if (o->kind == OPKIND_H2D_COPY && o->pieces <= 1) kind = RF_OP_H2D;
        rc = transfer(b, i, kind, o->bytes_host, o->pieces, kind == RF_OP_H2D ? MAX_CALL_PIECES : 1u << 20, span, &first);
    } else if (o->bytes_host > 0) {
        rc = transfer(b, i, RF_OP_GATHER, o->bytes_host, o->pieces, 1u << 20, span, &first);
    } else if (o->kind == OPKIND_GEMM || o->kind == OPKIND_LM_HEAD) {
        rc = gemm_op(b, i, &first);
    } else {
        rc = kernel_op(b, i, &first);
    }
    if (rc) return err_prefix(b->e, "plan op %u (%s)", i, opkind_name(o->kind));
    if (first) {
        first->n_after = n_after;
        memcpy(first->after, after, n_after * sizeof *after);
    }
    return ERR_OK;
}

void plan_replay_header(rf_workload_t *w, const char *name)
{
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->mode = RF_MODE_STREAMS;
    w->window_ms = 500;
    w->min_steps = 10;
    w->warmup_steps = 3;
    w->seed = 1;
    w->n_sessions = 1;
}

int plan_replay_make(const plan_replay_in_t *in, rf_workload_t *w, plan_replay_note_t *note, err_t *e)
{
    memset(note, 0, sizeof *note);
    if (strlen(in->name) > RF_NAME_MAX) return err_set(e, ERR_INVAL, "replay name '%s' is longer than %d", in->name, RF_NAME_MAX);
    plan_replay_header(w, in->name);
    build_t *b = malloc(sizeof *b);
    uint32_t *rid = malloc(((size_t)in->plan->n_ops + 1) * sizeof *rid);
    int rc = b && rid ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) {
        *b = (build_t){.in = in, .s = &w->sessions[0], .note = note, .e = e, .quiet = *in->cost, .rid = rid};
        b->quiet.cal = NULL;
        for (uint32_t i = 0; i < in->plan->n_ops; i++) rid[i] = NONE;
        rc = cost_paths_resolve(&b->quiet, in->hw, in->sim, 0, HWINST_DRAM, &b->paths, e);
    }
    for (uint32_t i = 0; !rc && i < in->plan->n_ops; i++) rc = map_op(b, i);
    if (!rc) {
        /* the region: the widest span any transfer wants, within the format's 64 GiB */
        rf_session_t *s = &w->sessions[0];
        double want = 4096;
        for (uint32_t j = 0; j < s->n_ops; j++) want = fmax(want, b->want_span[j]);
        double region = fmin(ceil(want / 4096) * 4096, (double)RF_MAX_REGION_BYTES);
        if (want > region) note->span_clipped_bytes = want;
        s->region_bytes = (uint64_t)region;
        for (uint32_t j = 0; j < s->n_ops; j++)
            if (rf_kind_is_transfer(s->ops[j].kind))
                s->ops[j].span_bytes = (uint64_t)fmax((double)(s->ops[j].pieces * s->ops[j].piece_bytes),
                                                      fmin(b->want_span[j], region));
    }
    free(rid);
    free(b);
    return rc;
}

int plan_replay_write(const char *path, const rf_workload_t *w, const char *what, const plan_replay_note_t *note,
                      err_t *e)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m) return err_set(e, ERR_NOMEM, "%s: out of memory", path);
    fprintf(m, "# %s\n", what);
    if (note) {
        fprintf(m, "# approximate (cli/plan_replay.h): each plan op is the replay op of its path; kernels keep their HBM\n"
                   "# bytes and their time alone (an hbm read, then a spin), not their code; GEMMs are BF16 whatever the\n"
                   "# weights; pieces are powers of two at random slots of their span; launches are separate, not a graph\n");
        fprintf(m, "# dropped: batching and merge keys; %u kernel(s) partly or wholly a spin; %u cross-stream dependencies\n"
                   "# beyond 8 per op; %u d2h copies coarsened to 256 pieces (one API call each);\n"
                   "# %u GEMMs shaped from FLOPs and bytes", note->spins, note->after_dropped,
                note->d2h_coarsened, note->gemm_from_flops);
        if (note->span_clipped_bytes > 0) fprintf(m, "; spans of %.0f bytes cut to the 64 GiB region", note->span_clipped_bytes);
        fputc('\n', m);
    }
    int rc = rf_write(m, w);
    fclose(m);
    if (rc || !buf) {
        free(buf);
        return err_set(e, ERR_NOMEM, "%s: out of memory", path);
    }
    /* what is written must be a workload kbench reads: parse it back first */
    rf_workload_t *back = malloc(sizeof *back);
    char msg[512];
    rc = !back ? err_set(e, ERR_NOMEM, "out of memory")
         : rf_parse(buf, n, path, back, msg, sizeof msg) ? err_set(e, ERR_INVAL, "the replay written is invalid: %s", msg)
                                                         : ERR_OK;
    free(back);
    atomicio_t *f = NULL;
    if (!rc) rc = atomicio_open(path, &f, e);
    if (!rc) {
        fwrite(buf, 1, n, atomicio_file(f));
        rc = atomicio_commit(f, e);
    }
    free(buf);
    return rc;
}
