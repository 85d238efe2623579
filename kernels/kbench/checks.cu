/* checks.cu: every kernel against its C reference, on fresh random inputs
 * (never zeros), before any suite times it. Outputs are poisoned first so an
 * unwritten element fails the comparison.
 */
#include <stdlib.h>
#include <string.h>
#include "kb.h"
#include "kern.h"
#include "checks.h"
#include "hostmem.h"
#include "ref/planes.h"
#include "ref/wfplan.h"
#include "ref/scans.h"
#include "ref/topk.h"
#include "ref/attn.h"

static uint64_t g_seed;

static void *dmalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0xcd, bytes));                 /* poison */
    return p;
}

static void *to_dev(const void *h, size_t bytes)
{
    void *d = dmalloc(bytes);
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void *to_host(const void *d, size_t bytes)
{
    void *h = malloc(bytes);
    CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static int report(const char *what, int bad)
{
    fprintf(stderr, "check %-28s %s\n", what, bad ? "FAILED" : "ok");
    return bad;
}

/* max |a - b| / (max |b| + 1e-6) over n floats; NaN counts as a failure. */
static double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d != d)
            return 1e30;
        num = d > num ? d : num;
        den = fabs(b[i]) > den ? fabs(b[i]) : den;
    }
    return num / den;
}

static uint16_t *host_keys(size_t rows, uint64_t seed)
{
    uint16_t *k = (uint16_t *)malloc(rows * KREF_D * sizeof *k);
    for (size_t t = 0; t < rows; t++)
        for (int j = 0; j < KREF_D; j++)
            k[t * KREF_D + j] = kref_f32_to_bf16(kref_key(seed, t, j));
    return k;
}

static float *host_normal(size_t n, float scale, uint64_t seed)
{
    float *x = (float *)malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * kref_normal(seed, i);
    return x;
}

/* Quantise, plan, fetch (from mapped host memory) and scan, for one T. */
static int check_planes(int T)
{
    int heads = 2, g = 4, bad = 0;
    size_t n = 4 * (size_t)T, ib = n / T * kref_chunk_bytes(T);
    uint16_t *k = host_keys(heads * n, g_seed++);
    uint8_t *ref = (uint8_t *)malloc(heads * ib);
    for (int h = 0; h < heads; h++)
        kref_planes_quantize(k + h * n * KREF_D, n, T, ref + h * ib);
    uint16_t *dk = (uint16_t *)to_dev(k, heads * n * KREF_D * 2);
    uint8_t *didx = (uint8_t *)dmalloc(heads * ib);
    kb_quantize(dk, n * KREF_D, heads, n, T, didx, ib, 0);
    uint8_t *got = (uint8_t *)to_host(didx, heads * ib);
    char name[64];
    snprintf(name, sizeof name, "quantize T=%d", T);
    bad |= report(name, memcmp(got, ref, heads * ib) != 0);

    float *q = host_normal(heads * g * KREF_D, 1.0f, g_seed++), s2[KREF_D];
    for (int j = 0; j < KREF_D; j++)
        s2[j] = kref_key_sigma(j) * kref_key_sigma(j);
    float *dq = (float *)to_dev(q, heads * g * KREF_D * 4), *ds2 = (float *)to_dev(s2, sizeof s2);
    kref_plan_t *dplan = (kref_plan_t *)dmalloc(heads * sizeof(kref_plan_t));
    int budgets[3] = {48, 200, 64}, decays[3] = {4, 4, 1};
    for (int bi = 0; bi < 3; bi++) {
        kb_wf_plan(dq, g, ds2, heads, budgets[bi], decays[bi], T, dplan, 0);
        kref_plan_t *gp = (kref_plan_t *)to_host(dplan, heads * sizeof(kref_plan_t));
        int pbad = 0;
        for (int h = 0; h < heads; h++) {
            float e[KREF_D];
            uint8_t depth[KREF_D];
            kref_plan_t rp;
            kref_wf_gains(q + h * g * KREF_D, g, s2, e);
            kref_wf_plan(e, KREF_D, budgets[bi], decays[bi], depth);
            kref_plan_from_depth(depth, T, &rp);
            pbad |= memcmp(&rp, &gp[h], sizeof rp) != 0;
        }
        snprintf(name, sizeof name, "wf_plan budget=%d decay=%d", budgets[bi], decays[bi]);
        bad |= report(name, pbad);
        free(gp);
    }
    /* the fetch reads the index from mapped host memory */
    kb_hostbuf_t hb;
    if (kb_host_alloc(&hb, heads * ib, KB_HOSTALLOC) != 0)
        return report("host buffer", 1);
    memcpy(hb.ptr, ref, heads * ib);
    kref_plan_t *gp = (kref_plan_t *)to_host(dplan, heads * sizeof(kref_plan_t));
    size_t cb = n / T * gp[0].chunk_prefix_bytes, cb1 = n / T * gp[1].chunk_prefix_bytes;
    size_t cstride = ((cb > cb1 ? cb : cb1) + 15) / 16 * 16;
    uint8_t *dcmp = (uint8_t *)dmalloc(heads * cstride);
    kb_fetch_prefix_sm((const uint8_t *)hb.ptr, ib, dcmp, cstride, dplan, heads, n, T, 64, 0);
    uint8_t *gc = (uint8_t *)to_host(dcmp, heads * cstride), *rc = (uint8_t *)malloc(cstride);
    int fbad = 0;
    for (int h = 0; h < heads; h++) {
        kref_planes_compact(ref + h * ib, n, T, &gp[h], rc);
        fbad |= memcmp(gc + h * cstride, rc, n / T * gp[h].chunk_prefix_bytes) != 0;
    }
    snprintf(name, sizeof name, "index_fetch sm T=%d", T);
    bad |= report(name, fbad);
    /* scans: full layout in HBM, compact layout, g = 1 and 4 */
    float *dsc = (float *)dmalloc(heads * g * n * 4), *rs = (float *)malloc(n * 4);
    for (int mode = 0; mode < 9; mode++) {
        int compact = mode % 3 == 1, qg = mode % 3 == 2 ? 4 : 1, variant = 1 + mode / 3;
        CK(cudaMemset(dsc, 0xcd, heads * g * n * 4));
        kb_scan_planes(variant, compact ? dcmp : didx, compact ? cstride : ib, compact, dplan, dq, qg,
                       heads, n, T, dsc, 0);
        float *gs = (float *)to_host(dsc, heads * qg * n * 4);
        double err = 0;
        for (int h = 0; h < heads; h++) {
            uint8_t depth[KREF_D] = {0};
            for (int a = 0; a < gp[h].n_active; a++)
                depth[gp[h].chan[a]] = gp[h].depth[a];
            for (int gi = 0; gi < qg; gi++) {
                kref_fathom_scan(ref + h * ib, n, T, q + (h * qg + gi) * KREF_D, depth, rs);
                double e = rel_err(gs + (h * qg + gi) * n, rs, n);
                err = e > err ? e : err;
            }
        }
        snprintf(name, sizeof name, "scan fathom v%d %s qg=%d T=%d", variant,
                 compact ? "compact" : "full", qg, T);
        bad |= report(name, err > 1e-4);
        free(gs);
    }
    kb_host_free(&hb);
    free(k); free(ref); free(got); free(q); free(gp); free(gc); free(rc); free(rs);
    CK(cudaFree(dk)); CK(cudaFree(didx)); CK(cudaFree(dq)); CK(cudaFree(ds2));
    CK(cudaFree(dplan)); CK(cudaFree(dcmp)); CK(cudaFree(dsc));
    return bad;
}

static int check_pertoken(int C)
{
    int heads = 2, chans[32], bad = 0;
    size_t n = 1024, ib = n / 64 * kref_pt_block_bytes(C);
    for (int c = 0; c < C; c++)
        chans[c] = (c * 37 + 5) % KREF_D;
    uint16_t *k = host_keys(heads * n, g_seed++);
    uint8_t *ref = (uint8_t *)malloc(heads * ib);
    for (int h = 0; h < heads; h++)
        kref_pt_build(k + h * n * KREF_D, n, chans, C, ref + h * ib);
    uint16_t *dk = (uint16_t *)to_dev(k, heads * n * KREF_D * 2);
    int *dch = (int *)to_dev(chans, sizeof chans);
    uint8_t *didx = (uint8_t *)dmalloc(heads * ib);
    kb_build_pertoken(dk, n * KREF_D, heads, n, dch, C, didx, ib, 0);
    uint8_t *got = (uint8_t *)to_host(didx, heads * ib);
    char name[64];
    snprintf(name, sizeof name, "build pertoken C=%d", C);
    bad |= report(name, memcmp(got, ref, heads * ib) != 0);
    float *qc = host_normal(heads * C, 1.0f, g_seed++), *rs = (float *)malloc(n * 4);
    float *dqc = (float *)to_dev(qc, heads * C * 4), *dsc = (float *)dmalloc(heads * n * 4);
    kb_scan_pertoken(didx, ib, C, dqc, heads, n, dsc, 0);
    float *gs = (float *)to_host(dsc, heads * n * 4);
    double err = 0;
    for (int h = 0; h < heads; h++) {
        kref_pt_scan(ref + h * ib, n, C, qc + h * C, rs);
        double e = rel_err(gs + h * n, rs, n);
        err = e > err ? e : err;
    }
    snprintf(name, sizeof name, "scan pertoken C=%d", C);
    bad |= report(name, err > 1e-4);
    free(k); free(ref); free(got); free(qc); free(rs); free(gs);
    CK(cudaFree(dk)); CK(cudaFree(dch)); CK(cudaFree(didx)); CK(cudaFree(dqc)); CK(cudaFree(dsc));
    return bad;
}

static int check_hash_landmark(void)
{
    int qh = 4, heads = 2, P = 16, bad = 0;
    size_t n = 4096, np = n / P;
    uint32_t *sig = (uint32_t *)malloc(qh * n * 4), qs[4];
    for (size_t i = 0; i < qh * n; i++)
        sig[i] = (uint32_t)kref_mix64(g_seed * 7919 + i);
    for (int h = 0; h < qh; h++)
        qs[h] = (uint32_t)kref_mix64(g_seed * 31 + h);
    g_seed++;
    uint32_t *dsig = (uint32_t *)to_dev(sig, qh * n * 4), *dqs = (uint32_t *)to_dev(qs, sizeof qs);
    float *dsc = (float *)dmalloc(qh * n * 4), *rs = (float *)malloc(n * 4);
    kb_scan_hash(dsig, dqs, qh, n, dsc, 0);
    float *gs = (float *)to_host(dsc, qh * n * 4);
    int hbad = 0;
    for (int h = 0; h < qh; h++) {
        kref_hash_scan(sig + h * n, n, qs[h], rs);
        hbad |= memcmp(rs, gs + h * n, n * 4) != 0;
    }
    bad |= report("scan hashattn", hbad);
    uint16_t *k = host_keys(heads * n, g_seed++);
    size_t lb = np * KREF_LM_PAGE_BYTES;
    uint8_t *ref = (uint8_t *)malloc(heads * lb);
    for (int h = 0; h < heads; h++)
        kref_lm_build(k + h * n * KREF_D, n, P, ref + h * lb);
    uint16_t *dk = (uint16_t *)to_dev(k, heads * n * KREF_D * 2);
    uint8_t *dlm = (uint8_t *)dmalloc(heads * lb);
    kb_build_landmark(dk, n * KREF_D, heads, n, P, dlm, lb, 0);
    uint8_t *got = (uint8_t *)to_host(dlm, heads * lb);
    bad |= report("build landmark P=16", memcmp(got, ref, heads * lb) != 0);
    float *q = host_normal(heads * KREF_D, 1.0f, g_seed++), *dq = (float *)to_dev(q, heads * KREF_D * 4);
    kb_scan_landmark(dlm, lb, dq, heads, np, dsc, 0);
    float *gl = (float *)to_host(dsc, heads * np * 4);
    double err = 0;
    for (int h = 0; h < heads; h++) {
        kref_lm_scan(ref + h * lb, np, q + h * KREF_D, rs);
        double e = rel_err(gl + h * np, rs, np);
        err = e > err ? e : err;
    }
    bad |= report("scan landmark", err > 1e-4);
    free(sig); free(rs); free(gs); free(k); free(ref); free(got); free(q); free(gl);
    CK(cudaFree(dsig)); CK(cudaFree(dqs)); CK(cudaFree(dsc)); CK(cudaFree(dk)); CK(cudaFree(dlm));
    CK(cudaFree(dq));
    return bad;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The selected indices, sorted, equal the reference's: ties at the k-th largest too (the lowest
 * indices), on a row of distinct values, one of heavy ties (33 values) and one all equal; at a
 * length whose blocks' spans hold one tile of the ties pass and at one whose spans hold several. */
static int check_topk_n(size_t n)
{
    int rows = 4, k = 2048, bad = 0;
    float *x = host_normal(rows * n, 5.0f, g_seed++);
    for (size_t i = 0; i < n; i++) {                /* row 2: heavy ties; row 3: all tied */
        x[2 * n + i] = (float)(kref_mix64(g_seed + i) % 33);
        x[3 * n + i] = 1.0f;
    }
    float *dx = (float *)to_dev(x, rows * n * 4);
    uint32_t *didx = (uint32_t *)dmalloc(rows * k * 4);
    kb_topk_ws_t *ws = kb_topk_ws_new(rows, rows * n);
    kb_topk(dx, rows, n, k, didx, ws, 0);
    uint32_t *gi = (uint32_t *)to_host(didx, rows * k * 4), *ri = (uint32_t *)malloc(k * 4);
    for (int r = 0; r < rows; r++) {
        kref_topk(x + r * n, n, k, ri);
        qsort(gi + r * k, k, 4, cmp_u32);
        qsort(ri, k, 4, cmp_u32);
        bad |= memcmp(gi + r * k, ri, k * 4) != 0;
    }
    char name[64];
    snprintf(name, sizeof name, "topk n=%zu k=%d", n, k);
    bad = report(name, bad);
    kb_topk_ws_free(ws);
    free(x); free(gi); free(ri);
    CK(cudaFree(dx)); CK(cudaFree(didx));
    return bad;
}

static int check_topk(void)
{
    return check_topk_n(100000) | check_topk_n(2500001);
}

/* Attention over interleaved rows in HBM and over apart K, V in host memory. */
static int check_attn(void)
{
    int heads = 2, bad = 0;
    size_t n = 3000;
    for (int g = 1; g <= 4; g += 3)
        for (int where = 0; where < 2; where++) {
            size_t rs = where ? KREF_D : 2 * KREF_D, voff = where ? heads * n * KREF_D : KREF_D;
            size_t elems = heads * n * 2 * KREF_D;
            uint16_t *kv = (uint16_t *)malloc(elems * 2);
            for (size_t i = 0; i < elems; i++)
                kv[i] = kref_f32_to_bf16(kref_normal(g_seed, i));
            g_seed++;
            float *q = host_normal(heads * g * KREF_D, 0.15f, g_seed++);
            kb_hostbuf_t hb;
            const uint16_t *src;
            uint16_t *dkv = NULL;
            if (where) {
                if (kb_host_alloc(&hb, elems * 2, KB_HOSTALLOC) != 0)
                    return report("host buffer", 1);
                memcpy(hb.ptr, kv, elems * 2);
                src = (const uint16_t *)hb.ptr;
            } else {
                dkv = (uint16_t *)to_dev(kv, elems * 2);
                src = dkv;
            }
            size_t hstride = where ? n * KREF_D : n * 2 * KREF_D;
            int ns = kb_attn_splits(n, heads);
            void *part = dmalloc(kb_attn_part_bytes(heads, ns + 1, g));
            float *dq = (float *)to_dev(q, heads * g * KREF_D * 4);
            float *dout = (float *)dmalloc(heads * g * KREF_D * 4);
            /* rows split over two launches, as sparse + tail in a step */
            kb_attn_partial(src, hstride, rs, voff, dq, g, heads, n - 100, ns, 0, ns + 1, part, 0);
            kb_attn_partial(src + (n - 100) * rs, hstride, rs, voff, dq, g, heads, 100, 1, ns,
                            ns + 1, part, 0);
            kb_attn_combine(part, g, heads, ns + 1, dout, 0);
            float *got = (float *)to_host(dout, heads * g * KREF_D * 4);
            float *ref = (float *)malloc(heads * g * KREF_D * 4);
            for (int h = 0; h < heads; h++)
                kref_attn(q + h * g * KREF_D, g, kv + h * hstride, kv + h * hstride + voff, rs, n,
                          ref + h * g * KREF_D);
            char name[64];
            snprintf(name, sizeof name, "attn g=%d %s", g, where ? "host apart" : "hbm interleaved");
            bad |= report(name, rel_err(got, ref, heads * g * KREF_D) > 2e-3);
            if (where)
                kb_host_free(&hb);
            else
                CK(cudaFree(dkv));
            free(kv); free(q); free(got); free(ref);
            CK(cudaFree(part)); CK(cudaFree(dq)); CK(cudaFree(dout));
        }
    return bad;
}

int kb_checks(uint64_t seed)
{
    g_seed = seed;
    int bad = 0;
    bad |= check_planes(256);
    bad |= check_planes(1024);
    bad |= check_pertoken(32);
    bad |= check_pertoken(16);
    bad |= check_hash_landmark();
    bad |= check_topk();
    bad |= check_attn();
    CK(cudaDeviceSynchronize());
    return bad;
}
