/* plan_yaml — a built-in plan as a whole user plan (cli/plan_yaml.h). */
#include "cli/plan_yaml.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "models/opkind.h"
#include "models/uplan.h"

#define NONE UINT32_MAX

/* How the replay ops are laid out: step ops [0, a), layer l's ops [a + l·Y, a + (l+1)·Y), end ops
 * from a + L·Y; flat: every op in step. */
typedef struct layout {
    const plan_yaml_in_t *in;
    uint32_t a, Y, L, n;
    bool flat;
} layout_t;

static int kind_of(const layout_t *g, uint32_t j) { return g->in->plan->ops[g->in->note->source[j]].kind; }
static uint16_t layer_of(const layout_t *g, uint32_t j) { return g->in->plan->ops[g->in->note->source[j]].layer; }

/* A reference from an op of list `list` (layer l) to replay op x: its list, index and how many
 * layers back (prevK.); false where the layout cannot say it. */
typedef struct ref {
    int list;   /* 0 step, 1 layer, 2 end */
    uint32_t back;
    uint32_t idx;
} ref_t;

static bool ref_of(const layout_t *g, int list, int l, uint32_t x, ref_t *r)
{
    uint32_t end0 = g->a + g->L * g->Y;
    if (g->flat || x < g->a) {
        *r = (ref_t){0, 0, x};
        return true;
    }
    if (x >= end0) {
        *r = (ref_t){2, 0, x - end0};
        return list == 2;
    }
    uint32_t lx = (x - g->a) / g->Y, i = (x - g->a) % g->Y;
    int here = list == 2 ? (int)g->L : l, back = here - (int)lx;
    *r = (ref_t){1, (uint32_t)back, i};
    return back >= (list == 1 ? 0 : 1) && back <= UPLAN_MAX_BACK;
}

/* The layer whose ops stand for all: one with every layer it may refer back to before it. */
static uint32_t template_layer(const layout_t *g) { return g->L - 1 < UPLAN_MAX_BACK ? g->L - 1 : UPLAN_MAX_BACK; }

static bool same_sizes(const rf_op_t *x, const rf_op_t *y)
{
    return x->kind == y->kind && x->stream == y->stream && x->pieces == y->pieces && x->piece_bytes == y->piece_bytes &&
           x->span_bytes == y->span_bytes && x->bytes == y->bytes && x->flops == y->flops && x->us == y->us &&
           x->m == y->m && x->n == y->n && x->k == y->k;
}

/* Whether every layer's ops are the template layer's (layer 1, or 0 alone) at their place: the same
 * kinds, sizes and references (prev. dropped in layer 0), and every reference sayable. */
static bool uniform(const layout_t *g)
{
    const rf_session_t *s = g->in->at_c;
    uint32_t t = template_layer(g);
    for (uint32_t l = 0; l < g->L; l++)
        for (uint32_t i = 0; i < g->Y; i++) {
            uint32_t j = g->a + l * g->Y + i, tj = g->a + t * g->Y + i;
            const rf_op_t *o = &s->ops[j], *to = &s->ops[tj];
            if (!same_sizes(o, to) || kind_of(g, j) != kind_of(g, tj)) return false;
            ref_t want[RF_MAX_AFTER];
            uint32_t nw = 0;
            for (uint32_t k = 0; k < to->n_after; k++) {
                ref_t r;
                if (!ref_of(g, 1, (int)t, to->after[k], &r)) return false;
                if (r.list != 1 || r.back <= l) want[nw++] = r;
            }
            if (o->n_after != nw) return false;
            for (uint32_t k = 0; k < nw; k++) {
                ref_t r;
                if (!ref_of(g, 1, (int)l, o->after[k], &r) || r.list != want[k].list || r.back != want[k].back ||
                    r.idx != want[k].idx)
                    return false;
            }
        }
    for (uint32_t j = g->a + g->L * g->Y; j < g->n; j++)
        for (uint32_t k = 0; k < s->ops[j].n_after; k++) {
            ref_t r;
            if (!ref_of(g, 2, 0, s->ops[j].after[k], &r)) return false;
        }
    return true;
}

/* Lays the ops out by their plan ops' layers; flat where they are not contiguous or not alike. */
static void lay_out(layout_t *g)
{
    const rf_session_t *s = g->in->at_c;
    g->n = s->n_ops;
    uint32_t first = NONE, last = NONE;
    for (uint32_t j = 0; j < g->n; j++)
        if (layer_of(g, j) != PLAN_NO_LAYER) {
            if (first == NONE) first = j;
            last = j;
        }
    g->flat = true;
    g->a = g->n, g->Y = 0, g->L = 0;
    if (first == NONE || g->in->layers < 1) return;
    uint32_t L = (uint32_t)g->in->layers, span = last - first + 1;
    if (span % L) return;
    g->a = first, g->Y = span / L, g->L = L, g->flat = false;
    for (uint32_t j = first; j <= last && !g->flat; j++)
        if (layer_of(g, j) != (j - first) / g->Y) g->flat = true;
    if (!g->flat && !uniform(g)) g->flat = true;
    if (g->flat) g->a = g->n, g->Y = 0, g->L = 0;
}

/* Op j's id: its kind's name, numbered from the second of that kind in its list. */
static void op_id(const layout_t *g, uint32_t from, uint32_t j, char *out, size_t n)
{
    const rf_session_t *s = g->in->at_c;
    const char *name = s->ops[j].kind == RF_OP_SYNC ? "sync" : opkind_name(kind_of(g, j));
    uint32_t seen = 0;
    for (uint32_t q = from; q < j; q++) {
        const char *qn = s->ops[q].kind == RF_OP_SYNC ? "sync" : opkind_name(kind_of(g, q));
        seen += !strcmp(qn, name);
    }
    if (seen) snprintf(out, n, "%s_%u", name, seen + 1);
    else snprintf(out, n, "%s", name);
}

/* The replay op x's id as op j of list `list` (layer l) names it. */
static void ref_text(const layout_t *g, int list, int l, uint32_t x, char *out, size_t n)
{
    ref_t r;
    ref_of(g, list, l, x, &r);
    int here = list == 2 ? (int)g->L : l;
    uint32_t from = r.list == 0 ? 0 : r.list == 2 ? g->a + g->L * g->Y : g->a + (uint32_t)(here - (int)r.back) * g->Y;
    char id[64], pre[16] = "";
    op_id(g, from, from + r.idx, id, sizeof id);
    if (r.list == 0 && list != 0) snprintf(pre, sizeof pre, "step.");
    else if (r.back == 1) snprintf(pre, sizeof pre, "prev.");
    else if (r.back > 1) snprintf(pre, sizeof pre, "prev%u.", r.back);
    snprintf(out, n, "%s%s", pre, id);
}

static void write_op(FILE *f, const layout_t *g, int list, int l, uint32_t from, uint32_t j)
{
    const rf_op_t *o = &g->in->at_c->ops[j];
    char id[64];
    op_id(g, from, j, id, sizeof id);
    fprintf(f, "  - {id: %s", id);
    if (o->kind != RF_OP_SYNC) fprintf(f, ", kind: %s", opkind_name(kind_of(g, j)));
    fprintf(f, ", path: %s", rf_kind_name(o->kind));
    if (o->kind != RF_OP_SYNC && o->kind != RF_OP_HOST) fprintf(f, ", stream: %u", o->stream);
    for (uint32_t k = 0; k < o->n_after; k++) {
        char r[96];
        ref_text(g, list, l, o->after[k], r, sizeof r);
        fprintf(f, "%s%s", k ? ", " : ", after: [", r);
    }
    if (o->n_after) fputc(']', f);
    if (rf_kind_is_transfer(o->kind))
        fprintf(f, ", pieces: %llu, piece_bytes: %llu, span: %llu", (unsigned long long)o->pieces,
                (unsigned long long)o->piece_bytes, (unsigned long long)o->span_bytes);
    else if (o->kind == RF_OP_HBM) fprintf(f, ", bytes: %llu", (unsigned long long)o->bytes);
    else if (o->kind == RF_OP_COMPUTE) fprintf(f, ", flops: %llu", (unsigned long long)o->flops);
    else if (o->kind == RF_OP_SPIN || o->kind == RF_OP_HOST) fprintf(f, ", us: %llu", (unsigned long long)o->us);
    else if (o->kind == RF_OP_GEMM)
        fprintf(f, ", m: %llu, n: %llu, k: %llu", (unsigned long long)o->m, (unsigned long long)o->n, (unsigned long long)o->k);
    /* sizes that grow from C to 2C grow with the context */
    const rf_session_t *s2 = g->in->at_2c;
    if (s2 && s2->n_ops == g->n && s2->ops[j].kind == o->kind && !same_sizes(&s2->ops[j], o)) fputs(", scale: context", f);
    fputs("}\n", f);
}

static void write_list(FILE *f, const layout_t *g, const char *key, int list, int l, uint32_t from, uint32_t to)
{
    if (from == to) {
        fprintf(f, "%s: []\n", key);
        return;
    }
    fprintf(f, "%s:\n", key);
    for (uint32_t j = from; j < to; j++) write_op(f, g, list, l, from, j);
}

int plan_yaml_write(FILE *f, const plan_yaml_in_t *in)
{
    layout_t g = {.in = in};
    lay_out(&g);
    const rf_session_t *s2 = in->at_2c;
    bool scaled = s2 && s2->n_ops == in->at_c->n_ops;
    fprintf(f, "# %s\n", in->what);
    fprintf(f, "# approximate: each plan op is the replay op(s) `odsim plan --emit-replay` maps it to (cli/plan_replay.h);\n"
               "# %s; %s\n",
            scaled ? "ops whose sizes differ at twice the context have scale: context"
                   : "the plan at twice the context has other ops: every size is fixed",
            g.flat ? "its layers are not alike: every op is in step" : "every layer's ops are alike");
    fprintf(f, "odsim_plan: 1\nname: %s\ncontext: %llu\nlayers: %d\nregion: %llu\n", in->name,
            (unsigned long long)in->context, g.flat ? 1 : in->layers, (unsigned long long)in->at_c->region_bytes);
    uint32_t t = g.L ? template_layer(&g) : 0;
    write_list(f, &g, "step", 0, 0, 0, g.a);
    write_list(f, &g, "layer", 1, (int)t, g.a + t * g.Y, g.a + (t + 1) * g.Y);
    write_list(f, &g, "end", 2, 0, g.a + g.L * g.Y, g.n);
    return ferror(f) ? -1 : 0;
}
