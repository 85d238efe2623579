#include "tests/validation/synth.h"

#include <dirent.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

static const char columns[] =
    "suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,allocator,"
    "streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,t_p90_us,t_p99_us,"
    "per_s,gbps,method,model,concurrent_id,t_mean_us,chunk_tokens\n";

void synth_default(synth_truth_t *t)
{
    *t = (synth_truth_t){.ce_latency_us = 4.9, .h2d_GBps = 55.3, .d2h_GBps = 53.1, .duplex_GBps = 97.9,
                         .ce2d_row_ns = 2.0, .cebatch_piece_us = 0.5, .gather_latency_us = 5,
                         .gather_peak_GBps = 51, .gather_block_GBps = 1.95, .rows_Mps = {200, 105, 41, 30},
                         .gather_weight = 4.3, .gather_duplex_coef = 2.0, .kernel_latency_us = 3,
                         .kernel_mem_eff = 0.85, .topk_latency_us = 50, .topk_elem_ns = 7.5, .topk_elem_l2_ns = 4.5, .topk_winner_ns = 0.3, .scan_fathom_v1_mem_eff = 0.05, .ce_handoff_us = 4.2, .ce_handoff_spread_us = 8.8, .rows_Mps_2GiB = 52, .heads_rows_Mps = {150, 50}, .heads_new_rows_Mps_4GiB = 44, .pt_rows_Mps_4GiB = 55, .heads_pt_rows_Mps_4GiB = 75, .ce2d_copy_us = 2.4, .zc_scan_eff = 0.8, .attn_dense_block_us = 4, .after_rows_Mps_4GiB = 35, .heads_after_rows_Mps_4GiB = 42, .win_after_rows_Mps_4GiB = 28, .gemm_latency_us = 9, .gemm_mem_eff = 0.8, .gemm_compute_eff = 0.7,
                         .launch_us = 2.5, .graph_launch_us = 8,
                         .hbm_GBps = 4800, .ce_b2b_gap_us = 2.9, .combine_latency_us = 4, .combine_split_ns = 360,
                         .combine_l2_latency_us = 3.8, .combine_l2_split_ns = 190,
                         .ce2d_page_row_ns = 9, .timeslice_us = 2000, .ctx_switch_us = 150, .gather_warm_rows = 37000,
                         .prefix_latency_us = 10, .prefix_eff = 0.86, .l2_dirty_MiB = 30, .l2_writeback_GBps = 3600};
}

typedef struct out {
    FILE *fp;
    gsl_rng *rng;
    double noise;
    double flops;   /* > 0: per_s is FLOP/s (kbench's gemm rows) */
    const char *layout;
    double heads;   /* > 0: the heads column (else 8 where n_tokens is set) */
    double chunk;   /* > 0: the chunk_tokens column */
    double k;       /* > 0: the k column */
    const char *place; /* the placement column (else host for the link suite, hbm for the rest) */
    double p10, p90;   /* > 0: the p10 and p90 written (else 0.98 and 1.03 times the median) */
    int reps;          /* > 0: the repetitions written (else 20) */
    double bits;       /* > 0: the bits column */
} out_t;

/* Warps of 32 scores holding one of k winners placed at random among n, averaged over 200 draws
 * (a Monte Carlo count, independent of the cost form's closed form). */
static double winner_warps(gsl_rng *rng, double n, double k)
{
    size_t nn = (size_t)n, kk = (size_t)fmin(k, n), warps = (nn + 31) / 32, hit = 0;
    unsigned char *taken = malloc(nn), *w = malloc(warps);
    for (int d = 0; taken && w && d < 200; d++) {
        memset(taken, 0, nn);
        memset(w, 0, warps);
        for (size_t i = 0; i < kk;) {
            size_t at = gsl_rng_uniform_int(rng, nn);
            if (taken[at]) continue;
            taken[at] = 1, i++;
            hit += !w[at / 32], w[at / 32] = 1;
        }
    }
    free(taken), free(w);
    return hit / 200.0;
}

static double jitter(out_t *o, double t) { return t * (1 + o->noise * gsl_ran_gaussian(o->rng, 1.0)); }

/* The p99 over the median each row is written with, by the jitter class the fit gives it: 1.08 on
 * the GPU alone, 1.06 for a copy over the host link, 1.12 for a kernel reading host memory. */
static double p99_factor(const char *suite, const char *op, const char *variant, const char *place)
{
    if (strcmp(suite, "link") && strcmp(place, "host")) return 1.08;
    static const char *const copies[] = {"h2d_copy", "d2h_copy", "h2d_copy2d", "h2d_batch", "flush"};
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++)
        if (!strcmp(op, copies[i])) return 1.06;
    return !strcmp(op, "index_fetch") && !strncmp(variant, "ce", 2) ? 1.06 : 1.12;
}

/* One row; numbers < 0 are written empty. */
static void row(out_t *o, const char *suite, const char *op, const char *variant, double n_tokens, double batch,
                double piece, double region, double pieces, double blocks, const char *policy, double bytes,
                double t_us, double cid, const char *method, double streams, double procs)
{
    double t = jitter(o, t_us);
    FILE *f = o->fp;
    fprintf(f, "%s,%s,%s,", suite, op, variant);
#define N(v) ((v) >= 0 ? fprintf(f, "%.0f,", (double)(v)) : fprintf(f, ","))
    N(n_tokens);
    N(o->heads > 0 ? o->heads : n_tokens >= 0 ? 8 : -1);
    N(o->bits > 0 ? o->bits : -1);
    N(o->k > 0 ? o->k : -1);
    N(batch);
    N(piece);
    N(region);
    N(pieces);
    N(blocks);
    fprintf(f, "hostalloc,");
    N(streams);
    N(procs);
    const char *place = o->place ? o->place : strcmp(suite, "kernels") ? "host" : "hbm";
    fprintf(f, "%s,%s,%s,", policy, place, o->layout ? o->layout : "");
    N(bytes);
    fprintf(f, "%d,%.3f,%.3f,%.3f,%.3f,", o->reps > 0 ? o->reps : 20, t, o->p10 > 0 ? o->p10 : t * 0.98,
            o->p90 > 0 ? o->p90 : t * 1.03,
            t * p99_factor(suite, op, variant, place));
    if (o->flops > 0) fprintf(f, "%.8g,", o->flops / (t * 1e-6));
    else if (pieces > 0) fprintf(f, "%.6g,", pieces / (t * 1e-6));
    else fprintf(f, ",");
    if (bytes > 0) fprintf(f, "%.3f,", bytes / (t * 1e3));
    else fprintf(f, ",");
    fprintf(f, "%s,qwen3-8b,", method);
    if (cid >= 0) fprintf(f, "%.0f", cid);
    fprintf(f, ",%.3f,", t);
    if (o->chunk > 0) fprintf(f, "%.0f", o->chunk);
    fputc('\n', f);
#undef N
}

static FILE *open_csv(const char *dir, const char *name, const char *suite, const char *device)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    if (!fp) return NULL;
    fprintf(fp, "# suite: %s\n# device: %s\n# driver: 580.65 (synthetic)\n# cuda: runtime 13.0\n"
                "# pcie: 32.0 GT/s PCIe x16\n# virtualisation: synthetic (test)\n# kbench: 0.1.0\n"
                "# commit: test\n# date: 2026-11-29T00:00:00Z\n%s",
            suite, device, columns);
    return fp;
}

static double rows_at(const synth_truth_t *t, double region)
{
    static const double kb[4] = {0.25 * GIB, 1 * GIB, 4 * GIB, 16 * GIB};
    if (region <= kb[0]) return t->rows_Mps[0] * 1e6;
    if (region >= kb[3]) return t->rows_Mps[3] * 1e6;
    int k = 0;
    while (k < 2 && region > kb[k + 1]) k++;
    double x = log(region / kb[k]) / log(4.0);
    return exp(log(t->rows_Mps[k]) + x * (log(t->rows_Mps[k + 1]) - log(t->rows_Mps[k]))) * 1e6;
}

/* GB/s of a gather alone. */
static double gather_cap(const synth_truth_t *t, double piece, double region, double blocks)
{
    return fmin(fmin(t->gather_peak_GBps, blocks * t->gather_block_GBps), rows_at(t, region) * piece * 1e-9);
}

/* Completion times (µs from the common start, latencies added) of two flows that share: rates
 * r1, r2 while both run, then the survivor at its alone rate a1 or a2. */
static void two_phase(double b1, double r1, double a1, double l1, double b2, double r2, double a2, double l2,
                      double *t1, double *t2)
{
    double f1 = b1 / r1, f2 = b2 / r2;   /* bytes per (GB/s) = ns; convert below */
    if (f1 <= f2) {
        *t1 = f1;
        *t2 = f1 + (b2 - r2 * f1) / a2;
    } else {
        *t2 = f2;
        *t1 = f2 + (b1 - r1 * f2) / a1;
    }
    *t1 = *t1 * 1e-3 + l1;
    *t2 = *t2 * 1e-3 + l2;
}

/* Row i of 65536 re-read 256 B rows: at 2 GiB over the whole region, and at 1 and 4 GiB head by
 * head: the cold share at the knot's own rate (2 GiB's off the 1-4 GiB curve; head by head faster);
 * at 4 GiB head by head, a new set each time: every row cold; at 4 GiB re-read back to back
 * (their page-table entries in L2), over the whole region and head by head; and at 4 GiB with
 * another gather between repetitions (every row cold), over the whole region and K/V head by head. */
static void order_row(out_t *o, const synth_truth_t *t, int i)
{
    static const double region[8] = {2 * GIB, 1 * GIB, 4 * GIB, 4 * GIB, 4 * GIB, 4 * GIB, 4 * GIB, 4 * GIB};
    static const char *const variant[8] = {"order_global_reread", "order_heads_reread", "order_heads_reread",
                                           "order_heads",         "order_global_warm",  "order_heads_warm",
                                           "order_global_after",  "order_kv_after"};
    double cold = i == 0   ? t->rows_Mps_2GiB
                  : i == 3 ? t->heads_new_rows_Mps_4GiB
                  : i == 4 ? t->pt_rows_Mps_4GiB
                  : i == 5 ? t->heads_pt_rows_Mps_4GiB
                  : i == 6 ? t->after_rows_Mps_4GiB
                  : i == 7 ? t->heads_after_rows_Mps_4GiB
                           : t->heads_rows_Mps[i - 1];
    double n = 65536, m = i == 3 || i >= 6 ? 1 : fmin(1, fmax(0, log2(n / t->gather_warm_rows)));   /* new: all cold */
    double us = n * ((1 - m) / rows_at(t, 0) + m / (cold * 1e6)) * 1e6;
    row(o, "link", "sm_gather", variant[i], -1, -1, 256, region[i], n, 528, "alone", n * 256,
        t->gather_latency_us + fmax(us, n * 256 / (t->gather_peak_GBps * 1e3)), -1, "", 1, -1);
}

int synth_write_dir(const char *dir, const char *device, const synth_truth_t *t, double noise_rel,
                    unsigned long seed)
{
    out_t o = {.rng = gsl_rng_alloc(gsl_rng_mt19937), .noise = noise_rel};
    if (!o.rng) return -1;
    gsl_rng_set(o.rng, seed);
    o.fp = open_csv(dir, "link.csv", "link", device);
    if (!o.fp) {
        gsl_rng_free(o.rng);
        return -1;
    }
    /* CE copies by size, both directions. */
    for (int dir_ = 0; dir_ < 2; dir_++)
        for (double sz = 4096; sz <= GIB; sz *= 2) {
            double bw = dir_ ? t->d2h_GBps : t->h2d_GBps;
            row(&o, "link", dir_ ? "d2h_copy" : "h2d_copy", "single", -1, -1, sz, -1, 1, -1, "alone", sz,
                t->ce_latency_us + sz / (bw * 1e3), -1, "", 1, -1);
        }
    /* Duplex pairs. */
    double dsz[3] = {4 * MIB, 64 * MIB, 256 * MIB};
    for (int i = 0; i < 3; i++) {
        double tt = t->ce_latency_us + 2 * dsz[i] / (t->duplex_GBps * 1e3);
        row(&o, "link", "h2d_copy", "duplex", -1, -1, dsz[i], -1, 1, -1, "mix:h2d+d2h", dsz[i], tt, 0, "", 2, -1);
        row(&o, "link", "d2h_copy", "duplex", -1, -1, dsz[i], -1, 1, -1, "mix:h2d+d2h", dsz[i], tt, 1, "", 2, -1);
    }
    /* 2D copies and batched copies. */
    for (double w = 64; w <= 128 * 1024; w *= 2) {
        double rows_ = 64 * MIB / w;
        row(&o, "link", "h2d_copy2d", "spitch4", -1, -1, w, 4 * 64 * MIB, rows_, -1, "alone", 64 * MIB,
            t->ce_latency_us + rows_ * t->ce2d_row_ns * 1e-3 + 64 * MIB / (t->h2d_GBps * 1e3), -1, "", 1, -1);
    }
    for (double p = 64; p <= 128 * 1024; p *= 2) {
        double cnt = fmin(64 * MIB / p, 8192);
        row(&o, "link", "h2d_batch", "random", -1, -1, p, 256 * MIB, cnt, -1, "alone", cnt * p,
            t->ce_latency_us + cnt * t->cebatch_piece_us + cnt * p / (t->h2d_GBps * 1e3), -1, "", 1, -1);
    }
    /* Chains of back-to-back copies: one setup, then the gap per further copy. */
    for (double p = 4096; p <= 16 * MIB; p *= 4)
        row(&o, "link", "h2d_copy", "b2b", -1, -1, p, -1, 16, -1, "alone", 16 * p,
            t->ce_latency_us + 15 * t->ce_b2b_gap_us + 16 * p / (t->h2d_GBps * 1e3), -1, "", 1, -1);
    /* SM gathers: the grid, then the blocks sweep. */
    double payload = 64 * MIB;
    for (double region = 256 * MIB; region <= 16 * GIB; region *= 4)
        for (double p = 64; p <= 128 * 1024; p *= 2)
            row(&o, "link", "sm_gather", "v2", -1, -1, p, region, payload / p, 528, "alone", payload,
                t->gather_latency_us + payload / (gather_cap(t, p, region, 528) * 1e3), -1, "", 1, -1);
    double bl[9] = {4, 8, 16, 33, 66, 132, 264, 528, 1056}, pcs[4] = {256, 512, 2048, 16384};
    double regs[2] = {256 * MIB, 4 * GIB};
    for (int ri = 0; ri < 2; ri++)
        for (int pi = 0; pi < 4; pi++)
            for (int bi = 0; bi < 9; bi++)
                row(&o, "link", "sm_gather", "v2", -1, -1, pcs[pi], regs[ri], payload / pcs[pi], bl[bi], "alone",
                    payload, t->gather_latency_us + payload / (gather_cap(t, pcs[pi], regs[ri], bl[bi]) * 1e3), -1,
                    "", 1, -1);
    /* Mixes: copy + gather and gather + D2H, for 512 B rows over 256 MiB and 256 B over 1 GiB. */
    double big = 256 * MIB;
    double gp[2] = {512, 256}, gr[2] = {256 * MIB, GIB};
    for (int gi = 0; gi < 2; gi++) {
        double G = gather_cap(t, gp[gi], gr[gi], 528);
        double w = t->gather_weight;
        double rg = fmin(G, t->h2d_GBps * w / (w + 1)), rc = t->h2d_GBps - rg;
        double tc, tg;
        two_phase(big, rc, t->h2d_GBps, t->ce_latency_us, big, rg, G, t->gather_latency_us, &tc, &tg);
        row(&o, "link", "h2d_copy", "mix_copy_gather", -1, -1, big, -1, 1, -1, "mix:copy+gather", big, tc, 0, "", 2, -1);
        row(&o, "link", "sm_gather", "mix_copy_gather", -1, -1, gp[gi], gr[gi], big / gp[gi], 528, "mix:copy+gather",
            big, tg, 1, "", 2, -1);
        double lam = t->duplex_GBps / (t->gather_duplex_coef * w + 1);
        double rg2 = w * lam, rd = lam;
        if (rg2 > G) {
            rg2 = G;
            rd = t->duplex_GBps - t->gather_duplex_coef * G;
        }
        rd = fmin(rd, t->d2h_GBps);
        double tg2, td;
        two_phase(big, rg2, G, t->gather_latency_us, big, rd, t->d2h_GBps, t->ce_latency_us, &tg2, &td);
        row(&o, "link", "sm_gather", "mix_gather_d2h", -1, -1, gp[gi], gr[gi], big / gp[gi], 528, "mix:gather+d2h",
            big, tg2, 0, "", 2, -1);
        row(&o, "link", "d2h_copy", "mix_gather_d2h", -1, -1, big, -1, 1, -1, "mix:gather+d2h", big, td, 1, "", 2, -1);
    }
    /* Re-read 256 B gathers by row count: the cold share clamp(log2(rows/warm), 0, 1) of the rows at
     * the region's rate, the rest at 256 MiB's. */
    for (double region = 256 * MIB; region <= 16 * GIB; region *= 4)
        for (double n = 4096; n <= 262144; n *= 2) {
            double m = fmin(1, fmax(0, log2(n / t->gather_warm_rows)));
            double rows_ps = 1 / ((1 - m) / rows_at(t, 0) + m / rows_at(t, region));
            double GBps = fmin(fmin(t->gather_peak_GBps, 528 * t->gather_block_GBps), rows_ps * 256 * 1e-9);
            row(&o, "link", "sm_gather", "v2_rows", -1, -1, 256, region, n, 528, "alone", n * 256,
                t->gather_latency_us + n * 256 / (GBps * 1e3), -1, "", 1, -1);
        }
    for (int i = 0; i < 4; i++) order_row(&o, t, i);
    /* Time slices of 2 and 3 contexts: runs of one slice, switch-outs of (N-1) slices and N switches. */
    for (int N = 2; N <= 3; N++) {
        char pol[16];
        snprintf(pol, sizeof pol, "procs:%d", N);
        row(&o, "link", "timeslice", "run", -1, -1, -1, -1, 300, -1, pol, -1, t->timeslice_us, -1, "", -1, N);
        row(&o, "link", "timeslice", "gap", -1, -1, -1, -1, 300, -1, pol, -1,
            (N - 1) * t->timeslice_us + N * t->ctx_switch_us, -1, "", -1, N);
    }
    for (int i = 4; i < 8; i++) order_row(&o, t, i);   /* last: the noise of the rows before them unchanged */
    /* the step's winner fetch, 16384 rows of 512 B at 4 GiB after another gather: every row cold
     * (none without a truth for it) */
    if (t->win_after_rows_Mps_4GiB > 0) {
        gsl_rng *keep = gsl_rng_clone(o.rng);   /* the noise of every later row as before the row came */
        row(&o, "link", "sm_gather", "order_win_after", -1, -1, 512, 4 * GIB, 16384, 528, "alone", 16384 * 512.0,
            t->gather_latency_us + fmax(16384 / t->win_after_rows_Mps_4GiB, 16384 * 512.0 / (t->gather_peak_GBps * 1e3)),
            -1, "", 1, -1);
        if (keep) gsl_rng_memcpy(o.rng, keep);
        gsl_rng_free(keep);
    }
    /* HashAttention's winner fetch, 65536 rows of 512 B at 4 GiB re-read after an L2 flush: the
     * cold share of its rows at the truth's rate, the rest warm (none without a truth for it) */
    if (t->win4_flush_rows_Mps_4GiB > 0) {
        gsl_rng *keep = gsl_rng_clone(o.rng);
        double n = 65536, m = fmin(1, fmax(0, log2(n / t->gather_warm_rows)));
        double us = n * ((1 - m) / rows_at(t, 0) + m / (t->win4_flush_rows_Mps_4GiB * 1e6)) * 1e6;
        row(&o, "link", "sm_gather", "order_win4_flush", -1, -1, 512, 4 * GIB, n, 528, "alone", n * 512,
            t->gather_latency_us + fmax(us, n * 512 / (t->gather_peak_GBps * 1e3)), -1, "", 1, -1);
        if (keep) gsl_rng_memcpy(o.rng, keep);
        gsl_rng_free(keep);
    }
    /* the step's winner fetch with each head's rows in a new order every repetition, after an L2
     * flush: every row at the truth's rate (none without a truth for it) */
    if (t->win_shuffle_rows_Mps_4GiB > 0) {
        gsl_rng *keep = gsl_rng_clone(o.rng);
        row(&o, "link", "sm_gather", "order_win_shuffle", -1, -1, 512, 4 * GIB, 16384, 528, "alone", 16384 * 512.0,
            t->gather_latency_us + fmax(16384 / t->win_shuffle_rows_Mps_4GiB, 16384 * 512.0 / (t->gather_peak_GBps * 1e3)),
            -1, "", 1, -1);
        if (keep) gsl_rng_memcpy(o.rng, keep);
        gsl_rng_free(keep);
    }
    /* the plane sweep (none without a truth for it): 128 B rows over 1 GiB at the truth's rate, and
     * 512 B rows over 512 MiB that the link binds */
    if (t->plane128_rows_Mps_1GiB > 0) {
        gsl_rng *keep = gsl_rng_clone(o.rng);
        double n = 493312;
        row(&o, "link", "sm_gather", "plane_sweep_p128", -1, -1, 128, GIB, n, 528, "alone", n * 128,
            t->gather_latency_us + fmax(n / t->plane128_rows_Mps_1GiB, n * 128 / (t->gather_peak_GBps * 1e3)), -1, "",
            1, -1);
        n = 246528;
        row(&o, "link", "sm_gather", "plane_sweep_p512", -1, -1, 512, GIB / 2, n, 528, "alone", n * 512,
            t->gather_latency_us + n * 512 / (t->gather_peak_GBps * 1e3), -1, "", 1, -1);
        if (keep) gsl_rng_memcpy(o.rng, keep);
        gsl_rng_free(keep);
    }
    int bad = fclose(o.fp) != 0;
    /* Kernels: HBM kernels by size, topk, GEMMs by batch, launches; some at n > 256K. */
    o.fp = open_csv(dir, "kernels.csv", "kernels", device);
    if (!o.fp) {
        gsl_rng_free(o.rng);
        return -1;
    }
    double hbm = t->hbm_GBps * 1e3 * t->kernel_mem_eff;  /* bytes/us */
    static const char *const ops[3] = {"scan", "attn_dense", "quantize"};
    static const double bpt[3] = {68, 256 * 36, 64};     /* bytes per token (arbitrary, distinct) */
    for (int k = 0; k < 3; k++)
        for (double n = 4096; n <= 1048576; n *= 2) {
            /* dense attention: 8 heads of min(16*132/8, n/64) split-K blocks, each SM's share in turn */
            double b = n * bpt[k] * 8, blocks_per_sm = 8 * fmin(264, n / 64) / 132;
            double t_us = t->kernel_latency_us + b / hbm + (k == 1 ? blocks_per_sm * t->attn_dense_block_us : 0);
            row(&o, "kernels", ops[k], "", n, -1, -1, -1, -1, -1, "alone", b, t_us, -1, "fathom", 1, -1);
        }
    /* Fathom's scan as the kernel (variant fathom), and kbench's numbered kernel 1 at one size:
     * the fit holds its fixed time at Fathom's and finds its efficiency. Scans short of the truth's
     * fill take as long as one over it. */
    for (double n = 4096; n <= 262144; n *= 4) {
        double b = n * 7 * 8;
        row(&o, "kernels", "scan", "fathom", n, -1, -1, -1, -1, -1, "alone", b,
            t->kernel_latency_us + fmax(b, t->scan_fathom_fill_bytes) / hbm, -1, "fathom", 1, -1);
    }
    /* the same scan with a layer's GEMMs queued behind, after_layer_us slower, and with nothing behind
     * as above; top-ks (any base time: only the twins' differences are read) both ways,
     * and over scores just written */
    for (int w = 0; w < 2 && t->after_layer_us > 0; w++) {
        o.layout = w ? "full;after_layer" : "full;after_flush";
        for (double n = 4096; n <= 262144; n *= 4) {
            double b = n * 7 * 8;
            row(&o, "kernels", "scan", "fathom", n, -1, -1, -1, -1, -1, "alone", b,
                t->kernel_latency_us + (w ? t->after_layer_us : 0) + fmax(b, t->scan_fathom_fill_bytes) / hbm, -1,
                "fathom", 1, -1);
        }
    }
    static const char *const tk_lay[3] = {";after_flush", ";after_layer", ";after_scores"};
    for (int w = 0; w < 3 && t->after_layer_us > 0; w++) {
        o.layout = tk_lay[w];
        o.k = 2048;
        for (double n = 32768; n <= 262144; n *= 2)
            row(&o, "kernels", "topk", "radix", n, -1, -1, -1, -1, -1, "alone", 4 * 8 * n * 4,
                50 + n / 1e4 + (w == 1 ? t->after_layer_us : w == 2 ? -t->topk_scores_l2_us : 0), -1, "", 1, -1);
        o.k = 0;
    }
    /* the same scan over its index still in the L2 ("compact;l2"), where the truth gives it a rate,
     * its times off the line by +w, -w, +w (the truth's wobble) */
    o.layout = "compact;l2";
    for (double n = 4096, w = t->scan_fathom_l2_wobble_us; n <= 65536 && t->scan_fathom_l2_mem_eff > 0; n *= 4, w = -w) {
        double b = n * 7 * 8;
        row(&o, "kernels", "scan", "fathom", n, -1, -1, -1, -1, -1, "alone", b,
            t->scan_fathom_l2_latency_us + w + b / (t->hbm_GBps * 1e3 * t->scan_fathom_l2_mem_eff), -1, "fathom", 1, -1);
    }
    /* the winner fetch with its K/V in HBM, where the truth gives it: 8 heads of k rows of 512 B,
     * its bytes read and written */
    o.layout = "interleaved";
    for (double n = 65536; n <= 262144 && t->win_hbm_mem_eff > 0; n *= 4)
        for (o.k = 256; o.k <= 8192; o.k *= 2) {
            double b = 2.0 * 8 * o.k * 512;
            row(&o, "kernels", "winner_fetch", "sm", n, -1, 512, 8 * n * 512, 8 * o.k, 528, "alone", b,
                t->win_hbm_latency_us + b / (t->hbm_GBps * 1e3 * t->win_hbm_mem_eff), -1, "fathom", 1, -1);
        }
    o.k = 0;
    o.layout = "full;kernel1";
    double v1_lat = t->scan_fathom_v1_latency_us > 0 ? t->scan_fathom_v1_latency_us : t->kernel_latency_us;
    for (double n = 16384; n <= 262144; n *= 4)
        if (t->scan_fathom_v1_latency_us > 0 || n == 65536)
            row(&o, "kernels", "scan", "fathom", n, -1, -1, -1, -1, -1, "alone", n * 7 * 8,
                v1_lat + n * 7 * 8 / (t->hbm_GBps * 1e3 * t->scan_fathom_v1_mem_eff), -1, "fathom", 1, -1);
    o.layout = "pertoken";
    for (o.bits = 68; o.bits <= 136 && t->scan_pertoken_bit_ns > 0; o.bits *= 2)
        for (double n = 4096; n <= 262144; n *= 4) {
            double b = 8 * n * (o.bits / 8 + 4);
            row(&o, "kernels", "scan", o.bits > 100 ? "pertoken136" : "pertoken68", n, -1, -1, -1, -1, -1, "alone", b,
                t->kernel_latency_us + o.bits * t->scan_pertoken_bit_ns * 1e-3 + b / hbm, -1, "pertoken", 1, -1);
        }
    o.bits = 0;
    o.layout = NULL;
    /* top-k of k over rows of n scores: a block per 4096 scores of a row, at most 4·132 blocks over
     * all rows; each score of a block costs topk_elem_ns (topk_elem_l2_ns when the rows' scores fit
     * in the 60 MiB L2), each row topk_row_us (topk_row_l2_us), a fixed topk_latency_us
     * (topk_latency_l2_us where set), each warp of 32 scores holding a winner topk_winner_ns and
     * each of one row's topk_winner_row_ns (the expected count by simulation of the k placed at
     * random, 200 draws) */
    static const double trows[6] = {8, 32, 64, 128, 256, 512};
    for (int ri = 0; ri < (t->topk_many_rows ? 6 : 4); ri++)
        for (double n = 4096; n <= 1048576; n *= 4)
            for (o.k = 256; o.k <= 2048; o.k *= 8) {
                double bpr = fmax(1, fmin(ceil(n / 4096), fmax(1, floor(4 * 132 / trows[ri]))));
                double per_block = ceil(n / bpr);
                bool l2 = 4 * trows[ri] * n <= 60 * MIB;
                double elem = l2 ? t->topk_elem_l2_ns : t->topk_elem_ns, ww = winner_warps(o.rng, n, o.k);
                o.heads = trows[ri];
                row(&o, "kernels", "topk", "radix", n, -1, -1, -1, -1, -1, "alone", 4 * trows[ri] * n * 4,
                    (l2 && t->topk_latency_l2_us > 0 ? t->topk_latency_l2_us : t->topk_latency_us) +
                        trows[ri] * (l2 ? t->topk_row_l2_us : t->topk_row_us) +
                        (per_block * elem + ww * (trows[ri] * t->topk_winner_ns + t->topk_winner_row_ns)) * 1e-3,
                    -1, "fathom", 1, -1);
            }
    o.k = 0;
    o.heads = 0;
    double peak = 989e12 * t->gemm_compute_eff;
    static const char *const shapes[3] = {"o", "qkv", "mlp"};
    for (int sh = 0; sh < 3; sh++)
        for (double bsz = 1; bsz <= 256; bsz *= 2) {
            double W = 2 * 6.9e9 / 36 * (sh == 0 ? 0.25 : sh == 1 ? 1 : 4);
            double b = W + bsz * 2 * 4096 * 6;
            o.flops = bsz * W;  /* 2 FLOPs per parameter per token, 2 bytes per parameter */
            row(&o, "kernels", "gemm", shapes[sh], -1, bsz, -1, -1, -1, -1, "alone", b,
                t->gemm_latency_us + fmax(b / (t->hbm_GBps * 1e3 * t->gemm_mem_eff), o.flops / peak * 1e6), -1, "", 1, -1);
            o.flops = 0;
        }
    /* A layer's GEMMs after a memset of W bytes (kbench's sizes): 110 us + min(W, dirty)/writeback. */
    static const double wmib[] = {0, 4, 8, 16, 24, 32, 40, 48, 64, 96, 128};
    for (size_t i = 0; i < sizeof wmib / sizeof *wmib; i++)
        row(&o, "kernels", "gemm", "layer_after_write", -1, 1, -1, wmib[i] * MIB, -1, -1, "alone", 386e6,
            110 + fmin(wmib[i], t->l2_dirty_MiB) * MIB / (t->l2_writeback_GBps * 1e3), -1, "", 1, -1);
    /* Index fetches as 2D copies a chunk apart: 281 copies (one per head and active channel), a row
     * per 1024-token chunk each, chained back to back, ce2d_copy_us each after the first. */
    for (double n = 4096; n <= 262144; n *= 4) {
        double copies = 281, rows_ = copies * n / 1024, bytes = n * 8 * 7.1;
        o.chunk = 1024;
        row(&o, "kernels", "index_fetch", "ce2d", n, -1, -1, n * 8 * 64, copies, -1, "alone", bytes,
            t->ce_latency_us + (copies - 1) * t->ce2d_copy_us + rows_ * t->ce2d_page_row_ns * 1e-3 +
                bytes / (t->h2d_GBps * 1e3), -1, "fathom", 1, -1);
    }
    /* The SM index fetch: the gather's peak times prefix_eff, its own fixed time. */
    for (double n = 4096; n <= 262144; n *= 4) {
        double bytes = n * 8 * 7.1, GBps = t->prefix_eff * fmin(t->gather_peak_GBps, 528 * t->gather_block_GBps);
        row(&o, "kernels", "index_fetch", "sm", n, -1, -1, n * 8 * 64, -1, 528, "alone", bytes,
            t->prefix_latency_us + bytes / (GBps * 1e3), -1, "fathom", 1, -1);
    }
    o.chunk = 0;
    /* The split-K combine by split count, cold and with its partials in L2; where the partial kernel
     * streamed more than the L2 (region > 60 MiB) kbench's "l2" rows are as cold as the others. */
    static const double splits[7] = {16, 32, 48, 64, 128, 264, 528};
    for (int i = 0; i < 7; i++)
        for (int l2 = 0; l2 < 2; l2++) {
            double region = 8 * 64 * splits[i] * 512;
            bool hot = l2 && region <= 60 * MIB;
            o.layout = l2 ? "interleaved;l2" : "interleaved";
            row(&o, "kernels", "attn_combine", "splitk", -1, -1, -1, region, splits[i], -1, "alone", splits[i] * 32 * 520,
                hot ? t->combine_l2_latency_us + splits[i] * t->combine_l2_split_ns * 1e-3
                    : t->combine_latency_us + splits[i] * t->combine_split_ns * 1e-3, -1, "", 1, -1);
        }
    /* attention over each query head's own winners in L2 (g = 1 over 32 heads) */
    o.heads = 32;
    o.layout = "interleaved;qh;l2";
    for (double k = 256; k <= 4096 && t->attn_qh_l2_mem_eff > 0; k *= 2) {
        double bytes = 32 * k * 512;
        row(&o, "kernels", "attn_sparse", "splitk", -1, -1, -1, -1, -1, -1, "alone", bytes,
            t->attn_qh_l2_latency_us + bytes / (t->hbm_GBps * 1e3 * t->attn_qh_l2_mem_eff), -1, "", 1, -1);
    }
    o.heads = 0;
    o.layout = NULL;
    for (int i = 0; i < 20; i++)
        row(&o, "kernels", "launch", "host_enqueue", -1, -1, -1, -1, 1, -1, "alone", -1, t->launch_us, -1, "", 1, -1);
    row(&o, "kernels", "launch", "copy_enqueue", -1, -1, -1, -1, 1, -1, "alone", -1, 1.5 * t->launch_us, -1, "", 1, -1);
    row(&o, "kernels", "launch", "empty_b2b", -1, -1, -1, -1, 100, -1, "alone", -1, 100 * 1.2, -1, "", 1, -1);
    /* an empty kernel after a kernel, and after a copy: the copy engine's hand-off between them, a
     * uniform over ce_handoff_us ± spread/2 (p10 and p90 at ∓ 0.4 spread; its median off-centre, as
     * kbench's wander), of 300 repetitions as kbench takes */
    row(&o, "kernels", "launch", "after_kernel", -1, -1, -1, -1, 1, -1, "alone", -1, 2.9, -1, "", 1, -1);
    o.p10 = 2.9 + t->ce_handoff_us - 0.4 * t->ce_handoff_spread_us;
    o.p90 = 2.9 + t->ce_handoff_us + 0.4 * t->ce_handoff_spread_us;
    o.reps = 300;
    row(&o, "kernels", "launch", "after_copy", -1, -1, -1, -1, 1, -1, "alone", -1, o.p10 + 0.2, -1, "", 1, -1);
    o.p10 = o.p90 = 0;
    o.reps = 0;
    /* 32 kernels of 5 us back to back, and with an event after each (event_us each; only where the
     * truth has events, as kbench ff3db94 and later time them) */
    if (t->event_us > 0) {
        row(&o, "kernels", "launch", "chain", -1, -1, -1, -1, 32, -1, "alone", -1, 32 * 5.0, -1, "", 1, -1);
        row(&o, "kernels", "launch", "chain_events", -1, -1, -1, -1, 32, -1, "alone", -1, 32 * (5.0 + t->event_us), -1,
            "", 1, -1);
    }
    static const double nodes_v[6] = {1, 2, 5, 10, 30, 100};
    for (int ni = 0; ni < 6; ni++) {
        double nodes = nodes_v[ni];
        row(&o, "kernels", "graph_replay", "empty_nodes", -1, -1, -1, -1, nodes, -1, "alone", -1,
            t->graph_launch_us + nodes * 1.1, -1, "", 1, -1);
    }
    /* Fathom's scan straight from host memory: the SM index fetch's form at zc_scan_eff of its rate,
     * its scores (4 B a head and token) aside. */
    o.place = "host";
    o.chunk = 1024;
    for (double n = 4096; n <= 262144; n *= 4) {
        double bytes = n * 8 * 7.1, GBps = t->prefix_eff * fmin(t->gather_peak_GBps, 528 * t->gather_block_GBps);
        row(&o, "kernels", "scan", "fathom", n, -1, -1, -1, -1, -1, "alone", bytes + 4 * 8 * n,
            t->prefix_latency_us + bytes / (t->zc_scan_eff * GBps * 1e3), -1, "", 1, -1);
    }
    o.place = NULL;
    o.chunk = 0;
    bad |= fclose(o.fp) != 0;
    /* Held out: whole layer steps and concurrent sessions. */
    o.fp = open_csv(dir, "step.csv", "step", device);
    if (!o.fp) {
        gsl_rng_free(o.rng);
        return -1;
    }
    for (double n = 65536; n <= 1048576; n *= 4)
        row(&o, "step", "layer_step", "", n, -1, -1, -1, -1, -1, "alone", n * 100, 50 + n * 1e-3, -1, "fathom", 1, -1);
    bad |= fclose(o.fp) != 0;
    o.fp = open_csv(dir, "concurrency.csv", "concurrency", device);
    if (!o.fp) {
        gsl_rng_free(o.rng);
        return -1;
    }
    for (int s = 1; s <= 4; s *= 2) {
        row(&o, "concurrency", "session_step", "", 262144, -1, -1, -1, -1, -1, "streams", -1, 400.0 * s, -1, "fathom", s, 1);
        row(&o, "concurrency", "session_step", "", 262144, -1, -1, -1, -1, -1, "processes", -1, 450.0 * s, -1, "fathom", 1, s);
    }
    bad |= fclose(o.fp) != 0;
    gsl_rng_free(o.rng);
    return bad ? -1 : 0;
}

char *synth_tmpdir(const char *leaf)
{
    const char *tmp = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/odsim-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmpl)) return NULL;
    size_t n = strlen(tmpl) + strlen(leaf) + 2;
    char *p = malloc(n);
    if (!p) return NULL;
    snprintf(p, n, "%s/%s", tmpl, leaf);
    if (mkdir(p, 0700)) {
        free(p);
        return NULL;
    }
    return p;
}

void synth_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char path[4096];
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) {
        *slash = '\0';
        rmdir(parent);
    }
}
