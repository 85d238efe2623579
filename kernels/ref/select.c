/* select.c: C reference of the methods' token selection and its quality (see select.h). */
#include <stdlib.h>
#include "select.h"
#include "planes.h"
#include "topk.h"
#include "wfplan.h"

typedef struct {
    float v;
    int j, b;
} cand_t;

static int cand_cmp(const void *pa, const void *pb)
{
    const cand_t *a = pa, *b = pb;
    if (kref_wf_ahead(a->v, a->j, a->b, b->v, b->j, b->b))
        return -1;
    return kref_wf_ahead(b->v, b->j, b->b, a->v, a->j, a->b) ? 1 : 0;
}

static size_t nblocks(size_t n) { return (n + KREF_SCALE_TOKENS - 1) / KREF_SCALE_TOKENS; }

int kref_sel_keys_init(kref_sel_keys_t *kk, const float *k, size_t n, int d,
                       const float *qcal, size_t nq)
{
    memset(kk, 0, sizeof *kk);
    if (d < 1 || d > KREF_D || n < 1)
        return -2;
    kk->n = n;
    kk->d = d;
    kk->k = k;
    kk->code = malloc(n * (size_t)d);
    kk->scale = malloc(nblocks(n) * (size_t)d * sizeof *kk->scale);
    if (!kk->code || !kk->scale) {
        kref_sel_keys_free(kk);
        return -1;
    }
    for (size_t b = 0; b < nblocks(n); b++) {
        size_t t0 = b * KREF_SCALE_TOKENS, t1 = t0 + KREF_SCALE_TOKENS < n ? t0 + KREF_SCALE_TOKENS : n;
        for (int j = 0; j < d; j++) {
            float m = 0.0f;
            for (size_t t = t0; t < t1; t++)
                m = fabsf(k[t * d + j]) > m ? fabsf(k[t * d + j]) : m;
            float s = kref_f16_to_f32(kref_quant_scale(m));
            kk->scale[b * d + j] = s;
            for (size_t t = t0; t < t1; t++)
                kk->code[t * d + j] = (uint8_t)kref_quant_code(k[t * d + j], s);
        }
    }
    cand_t rank[KREF_D];
    for (int j = 0; j < d; j++) {
        double s = 0.0, s2 = 0.0, qms = nq ? 0.0 : 1.0;
        for (size_t t = 0; t < n; t++) {
            s += k[t * d + j];
            s2 += (double)k[t * d + j] * k[t * d + j];
        }
        double mean = s / (double)n, var = s2 / (double)n - mean * mean;
        kk->sigma2[j] = var > 0.0 ? (float)var : 0.0f;
        for (size_t r = 0; r < nq; r++)
            qms += (double)qcal[r * d + j] * qcal[r * d + j] / (double)nq;
        rank[j] = (cand_t){(float)(kk->sigma2[j] * qms), j, 0};
    }
    qsort(rank, (size_t)d, sizeof rank[0], cand_cmp);
    for (int j = 0; j < d; j++)
        kk->chan_rank[j] = rank[j].j;
    return 0;
}

void kref_sel_keys_free(kref_sel_keys_t *kk)
{
    free(kk->code);
    free(kk->scale);
    free(kk->lsh_sig);
    free(kk->lsh_proj);
    free(kk->lm);
    memset(kk, 0, sizeof *kk);
}

float kref_sel_read(const kref_sel_keys_t *kk, size_t token, int chan, int t)
{
    return kref_dequant(kk->code[token * kk->d + chan], t,
                        kk->scale[token / KREF_SCALE_TOKENS * kk->d + chan]);
}

size_t kref_sel_cap(const kref_sel_keys_t *kk, const kref_sel_cfg_t *c)
{
    if (c->method == KREF_SEL_DENSE)
        return kk->n;
    if (c->method == KREF_SEL_LANDMARK && c->page >= 1) {
        size_t pages = ((size_t)c->k + c->page - 1) / c->page, cap = pages * c->page;
        return cap < kk->n ? cap : kk->n;
    }
    return (size_t)c->k;
}

void kref_sel_plan(const kref_sel_keys_t *kk, const float *q, int g, const kref_sel_cfg_t *c,
                   uint8_t *depth, int *planes, int *active)
{
    int d = kk->d;
    float e[KREF_D];
    for (int j = 0; j < d; j++) {
        float acc = 0.0f;
        for (int h = 0; h < g; h++)
            acc += q[h * d + j] * q[h * d + j];
        e[j] = acc * kk->sigma2[j];
    }
    memset(depth, 0, KREF_D);
    if (c->method == KREF_SEL_SPARQ) {
        int r = (int)floor(c->budget_bits / KREF_SEL_CHAN_BITS + 1e-9);
        kref_wf_plan(e, d, KREF_QBITS * r, 1, depth);
        *planes = KREF_QBITS * r;
        *active = r;
        return;
    }
    /* Fathom: walk the ranking; each candidate adds a plane, a channel's first
     * also its scale, so the reads only grow and the walk stops at the most
     * plane bits within the budget (the plan kref_wf_plan gives at that many). */
    cand_t cand[KREF_D * KREF_QBITS];
    for (int j = 0; j < d; j++)
        for (int b = 0; b < KREF_QBITS; b++)
            cand[j * KREF_QBITS + b] = (cand_t){kref_wf_value(e[j], b, 4), j, b};
    qsort(cand, (size_t)d * KREF_QBITS, sizeof cand[0], cand_cmp);
    int p = 0, a = 0;
    for (; p < d * KREF_QBITS; p++) {
        int a2 = a + (cand[p].b == 0);
        if (p + 1 + 0.25 * a2 > c->budget_bits + 1e-9)
            break;
        depth[cand[p].j]++;
        a = a2;
    }
    *planes = p;
    *active = a;
}

/* Signature bit i of x: r_i . x >= 0, accumulated in float over channels in
 * order (projections stored channel-major, so the bits' sums run side by side). */
static void lsh_sign(const float *proj, int bits, int d, const float *x, uint64_t *sig)
{
    float acc[KREF_SEL_LSH_MAX_BITS] = {0};
    for (int j = 0; j < d; j++)
        for (int i = 0; i < bits; i++)
            acc[i] += proj[(size_t)j * bits + i] * x[j];
    for (int i = 0; i < bits; i++)
        if (acc[i] >= 0.0f)
            sig[i / 64] |= 1ull << (i % 64);
}

int kref_sel_lsh_build(kref_sel_keys_t *kk, int bits, uint64_t seed)
{
    if (bits < 1 || bits > KREF_SEL_LSH_MAX_BITS)
        return -2;
    if (kk->lsh_sig && kk->lsh_bits >= bits && kk->lsh_seed == seed)
        return 0;   /* bit i does not depend on how many are built */
    int d = kk->d, words = (bits + 63) / 64;
    free(kk->lsh_sig);
    free(kk->lsh_proj);
    kk->lsh_sig = calloc(kk->n * (size_t)words, sizeof *kk->lsh_sig);
    kk->lsh_proj = malloc((size_t)bits * d * sizeof *kk->lsh_proj);
    if (!kk->lsh_sig || !kk->lsh_proj) {
        free(kk->lsh_sig);
        free(kk->lsh_proj);
        kk->lsh_sig = NULL;
        kk->lsh_proj = NULL;
        return -1;
    }
    for (int i = 0; i < bits; i++)
        for (int j = 0; j < d; j++)
            kk->lsh_proj[(size_t)j * bits + i] = kref_normal(seed, (uint64_t)i * d + j);
    for (size_t t = 0; t < kk->n; t++)
        lsh_sign(kk->lsh_proj, bits, d, kk->k + t * d, kk->lsh_sig + t * words);
    kk->lsh_bits = bits;
    kk->lsh_seed = seed;
    return 0;
}

static int build_pages(kref_sel_keys_t *kk, int page)
{
    if (kk->lm && kk->lm_page == page)
        return 0;
    int d = kk->d;
    size_t np = (kk->n + page - 1) / page;
    free(kk->lm);
    kk->lm = malloc(np * 2 * d * sizeof *kk->lm);
    if (!kk->lm)
        return -1;
    for (size_t pg = 0; pg < np; pg++) {
        float *mn = kk->lm + pg * 2 * d, *mx = mn + d;
        size_t t0 = pg * page, t1 = t0 + page < kk->n ? t0 + page : kk->n;
        for (int j = 0; j < d; j++) {
            mn[j] = mx[j] = kk->k[t0 * d + j];
            for (size_t t = t0 + 1; t < t1; t++) {
                float v = kk->k[t * d + j];
                mn[j] = v < mn[j] ? v : mn[j];
                mx[j] = v > mx[j] ? v : mx[j];
            }
        }
    }
    kk->lm_page = page;
    return 0;
}

static int popcount64(uint64_t x)
{
    int c = 0;
    for (; x; x &= x - 1)
        c++;
    return c;
}

/* Exact scores of the g query rows q summed, s[t] = (sum_h q_h) . k_t: the one
 * score that both the exact selection and the truth it is measured by use. */
static void exact_scores(const kref_sel_keys_t *kk, const float *q, int g, float *s)
{
    int d = kk->d;
    double qs[KREF_D] = {0};
    for (int h = 0; h < g; h++)
        for (int j = 0; j < d; j++)
            qs[j] += q[h * d + j];
    for (size_t t = 0; t < kk->n; t++) {
        double acc = 0.0;
        for (int j = 0; j < d; j++)
            acc += qs[j] * kk->k[t * d + j];
        s[t] = (float)acc;
    }
}

/* Scores of one set (the g query rows q) under c, into s (n entries, or one
 * per page for landmark); accumulates the set's plan into info. */
static void set_scores(const kref_sel_keys_t *kk, const float *q, int g, const kref_sel_cfg_t *c,
                       float *s, kref_sel_info_t *info)
{
    int d = kk->d;
    size_t n = kk->n;
    double qs[KREF_D] = {0};
    for (int h = 0; h < g; h++)
        for (int j = 0; j < d; j++)
            qs[j] += q[h * d + j];
    if (c->method == KREF_SEL_EXACT || c->method == KREF_SEL_DENSE) {
        exact_scores(kk, q, g, s);
    } else if (c->method == KREF_SEL_PERTOKEN) {
        int C = (int)floor(c->budget_bits / KREF_SEL_CHAN_BITS + 1e-9);
        for (size_t t = 0; t < n; t++) {
            double acc = 0.0;
            for (int i = 0; i < C; i++)
                acc += qs[kk->chan_rank[i]] * kref_sel_read(kk, t, kk->chan_rank[i], KREF_QBITS);
            s[t] = (float)acc;
        }
        info->read_bits += C * KREF_SEL_CHAN_BITS;
    } else if (c->method == KREF_SEL_SPARQ || c->method == KREF_SEL_FATHOM) {
        uint8_t depth[KREF_D];
        int planes, active;
        kref_sel_plan(kk, q, g, c, depth, &planes, &active);
        for (size_t t = 0; t < n; t++) {
            double acc = 0.0;
            for (int j = 0; j < d; j++)
                if (depth[j])
                    acc += qs[j] * kref_sel_read(kk, t, j, depth[j]);
            s[t] = (float)acc;
        }
        info->plane_bits += planes;
        info->active += active;
        info->read_bits += planes + 0.25 * active;
    } else if (c->method == KREF_SEL_LANDMARK) {
        size_t np = (n + c->page - 1) / c->page;
        for (size_t pg = 0; pg < np; pg++) {
            const float *mn = kk->lm + pg * 2 * d, *mx = mn + d;
            double acc = 0.0;
            for (int h = 0; h < g; h++)
                for (int j = 0; j < d; j++) {
                    double a = (double)q[h * d + j] * mn[j], b = (double)q[h * d + j] * mx[j];
                    acc += a > b ? a : b;
                }
            s[pg] = (float)acc;
        }
        info->read_bits += 2.0 * 16.0 * d / c->page;
    } else if (c->method == KREF_SEL_LSH) {
        int bits = (int)c->budget_bits, words = (bits + 63) / 64, stride = (kk->lsh_bits + 63) / 64;
        uint64_t qsig[KREF_SEL_LSH_MAX_BITS / 64];
        uint64_t last = bits % 64 ? (1ull << (bits % 64)) - 1 : ~0ull;   /* the first `bits` bits */
        for (size_t t = 0; t < n; t++)
            s[t] = 0.0f;
        for (int h = 0; h < g; h++) {
            memset(qsig, 0, sizeof qsig);
            lsh_sign(kk->lsh_proj, kk->lsh_bits, d, q + h * d, qsig);
            for (size_t t = 0; t < n; t++) {
                int ham = 0;
                for (int w = 0; w < words; w++)
                    ham += popcount64((kk->lsh_sig[t * stride + w] ^ qsig[w]) & (w == words - 1 ? last : ~0ull));
                s[t] += (float)(bits - ham);
            }
        }
        info->read_bits += bits;
    }
}

static int check_cfg(const kref_sel_keys_t *kk, const kref_sel_cfg_t *c)
{
    if (c->method < 0 || c->method >= KREF_SEL_N || c->k < 1 || (size_t)c->k > kk->n)
        return -2;
    int ch = (int)floor(c->budget_bits / KREF_SEL_CHAN_BITS + 1e-9);
    switch (c->method) {
    case KREF_SEL_PERTOKEN:
    case KREF_SEL_SPARQ:
        return ch >= 1 && ch <= kk->d ? 0 : -2;
    case KREF_SEL_FATHOM:
        return c->budget_bits >= 1.25 ? 0 : -2;
    case KREF_SEL_LANDMARK:
        return c->page >= 1 ? 0 : -2;
    case KREF_SEL_LSH:
        return c->budget_bits >= 1 && c->budget_bits <= KREF_SEL_LSH_MAX_BITS ? 0 : -2;
    default:
        return 0;
    }
}

int kref_sel_select(kref_sel_keys_t *kk, const float *q, int g, const kref_sel_cfg_t *c,
                    uint32_t *sel, size_t *nsel, kref_sel_info_t *info)
{
    kref_sel_info_t local;
    info = info ? info : &local;
    memset(info, 0, sizeof *info);
    int rc = check_cfg(kk, c);
    if (rc)
        return rc;
    if (c->method == KREF_SEL_LSH && kref_sel_lsh_build(kk, (int)c->budget_bits, c->seed))
        return -1;
    if (c->method == KREF_SEL_LANDMARK && build_pages(kk, c->page))
        return -1;
    size_t n = kk->n, cap = kref_sel_cap(kk, c);
    int sets = c->per_head ? g : 1, rows = c->per_head ? 1 : g;
    float *s = malloc(n * sizeof *s);
    uint32_t *idx = malloc(n * sizeof *idx);
    rc = s && idx ? 0 : -1;
    for (int set = 0; !rc && set < sets; set++) {
        uint32_t *out = sel + (size_t)set * cap;
        if (c->method == KREF_SEL_DENSE) {
            for (size_t t = 0; t < n; t++)
                out[t] = (uint32_t)t;
            nsel[set] = n;
            continue;
        }
        set_scores(kk, q + (size_t)set * rows * kk->d, rows, c, s, info);
        if (c->method != KREF_SEL_LANDMARK) {
            rc = kref_topk(s, n, c->k, out);
            nsel[set] = (size_t)c->k;
            continue;
        }
        size_t np = (n + c->page - 1) / c->page, want = (c->k + (size_t)c->page - 1) / c->page;
        want = want < np ? want : np;
        rc = kref_topk(s, np, (int)want, idx);
        size_t m = 0;
        for (size_t i = 0; !rc && i < want; i++)
            for (size_t t = (size_t)idx[i] * c->page; t < ((size_t)idx[i] + 1) * c->page && t < n; t++)
                out[m++] = (uint32_t)t;
        nsel[set] = m;
    }
    if (!rc && c->method != KREF_SEL_DENSE) {
        info->read_bits /= sets;
        info->plane_bits /= sets;
        info->active /= sets;
    }
    free(s);
    free(idx);
    return rc;
}

int kref_sel_truth(const kref_sel_keys_t *kk, const float *v, const float *q, int g, int k,
                   int per_head, kref_sel_truth_t *tr)
{
    size_t n = kk->n;
    int d = kk->d, sets = per_head ? g : 1;
    memset(tr, 0, sizeof *tr);
    if (k < 1 || (size_t)k > n)
        return -2;
    *tr = (kref_sel_truth_t){g, d, k, per_head, n, NULL, NULL, NULL, v};
    tr->p = malloc((size_t)g * n * sizeof *tr->p);
    tr->o = calloc((size_t)g * d, sizeof *tr->o);
    tr->top = malloc((size_t)sets * k * sizeof *tr->top);
    float *key = malloc(n * sizeof *key);
    int rc = tr->p && tr->o && tr->top && key ? 0 : -1;
    for (int set = 0; !rc && set < sets; set++) {
        exact_scores(kk, q + (size_t)set * d, per_head ? 1 : g, key);
        rc = kref_topk(key, n, k, tr->top + (size_t)set * k);
    }
    for (int h = 0; !rc && h < g; h++) {
        double *p = tr->p + (size_t)h * n, *o = tr->o + (size_t)h * d, mx = -HUGE_VAL, z = 0.0;
        for (size_t t = 0; t < n; t++) {
            double acc = 0.0;
            for (int j = 0; j < d; j++)
                acc += (double)q[h * d + j] * kk->k[t * d + j];
            p[t] = acc;
            mx = acc > mx ? acc : mx;
        }
        for (size_t t = 0; t < n; t++) {
            p[t] = exp(p[t] - mx);
            z += p[t];
        }
        for (size_t t = 0; t < n; t++) {
            p[t] /= z;
            for (int j = 0; j < d; j++)
                o[j] += p[t] * v[t * d + j];
        }
    }
    free(key);
    if (rc)
        kref_sel_truth_free(tr);
    return rc;
}

void kref_sel_truth_free(kref_sel_truth_t *tr)
{
    free(tr->p);
    free(tr->o);
    free(tr->top);
    memset(tr, 0, sizeof *tr);
}

int kref_sel_measure(const kref_sel_truth_t *tr, const uint32_t *sel, size_t cap,
                     const size_t *nsel, kref_sel_metrics_t *m)
{
    int d = tr->d;
    uint8_t *in = calloc(tr->n, 1);
    if (!in)
        return -1;
    memset(m, 0, sizeof *m);
    for (int h = 0; h < tr->g; h++) {
        int set = tr->per_head ? h : 0;
        const uint32_t *s = sel + (size_t)set * cap, *top = tr->top + (size_t)set * tr->k;
        const double *p = tr->p + (size_t)h * tr->n, *o = tr->o + (size_t)h * d;
        double kept = 0.0, os[KREF_D] = {0};
        for (size_t i = 0; i < nsel[set]; i++) {
            in[s[i]] = 1;
            kept += p[s[i]];
            for (int j = 0; j < d; j++)
                os[j] += p[s[i]] * tr->v[(size_t)s[i] * d + j];
        }
        int hit = 0;
        for (int i = 0; i < tr->k; i++)
            hit += in[top[i]];
        for (size_t i = 0; i < nsel[set]; i++)
            in[s[i]] = 0;
        double num = 0.0, den = 0.0;
        for (int j = 0; j < d; j++) {
            double a = kept > 0.0 ? os[j] / kept : 0.0;
            num += (a - o[j]) * (a - o[j]);
            den += o[j] * o[j];
        }
        m->recall += (double)hit / tr->k / tr->g;
        m->kept_mass += kept / tr->g;
        m->attn_error += (den > 0.0 ? sqrt(num / den) : sqrt(num)) / tr->g;
    }
    free(in);
    return 0;
}
