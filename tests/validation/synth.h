/* synth — synthetic kbench CSVs with a known ground truth, for the fitter's tests. */
#ifndef ODSIM_TESTS_VALIDATION_SYNTH_H
#define ODSIM_TESTS_VALIDATION_SYNTH_H

typedef struct synth_truth {
    double ce_latency_us, h2d_GBps, d2h_GBps, duplex_GBps, ce2d_row_ns, cebatch_piece_us;
    double gather_latency_us, gather_peak_GBps, gather_block_GBps, rows_Mps[4];
    double gather_weight, gather_duplex_coef;
    double kernel_latency_us, kernel_mem_eff, topk_latency_us, topk_elem_ns, topk_elem_l2_ns, topk_winner_ns, topk_winner_row_ns, event_us, scan_fathom_v1_mem_eff, ce_handoff_us, ce_handoff_spread_us, rows_Mps_2GiB, heads_rows_Mps[2], heads_new_rows_Mps_4GiB, pt_rows_Mps_4GiB, heads_pt_rows_Mps_4GiB, ce2d_copy_us, zc_scan_eff, attn_dense_block_us, after_rows_Mps_4GiB, heads_after_rows_Mps_4GiB, win_after_rows_Mps_4GiB, win4_flush_rows_Mps_4GiB, win_shuffle_rows_Mps_4GiB, plane128_rows_Mps_1GiB, scan_fathom_l2_latency_us, scan_fathom_l2_mem_eff, scan_fathom_l2_wobble_us, scan_fathom_fill_bytes, topk_row_us, topk_row_l2_us, topk_latency_l2_us, win_hbm_latency_us, win_hbm_mem_eff, gemm_latency_us, gemm_mem_eff, gemm_compute_eff, launch_us;
    int topk_many_rows; /* kbench 3e7ae2b's top-k rows over 256 and 512 rows too */
    /* > 0: kbench 2a03f8e's Fathom kernel 1 at 16K, 64K and 256K with this fixed time of its own
     * (else at 64K alone, at kernel_latency_us) */
    double scan_fathom_v1_latency_us;
    /* > 0: per-token scans of 68 and 136 bits at 4K-256K, each taking this long per bit of a token on
     * top of kernel_latency_us (bits·n·8 index bytes and 4 score bytes a token per head at kernel_mem_eff) */
    double scan_pertoken_bit_ns;
    /* > 0: kbench e6617d4's attention over each of 32 query heads' own k = 256..4096 winners (";qh":
     * 32·k rows of 512 B) with the winners in L2, at this fixed time and fraction of HBM bandwidth */
    double attn_qh_l2_latency_us, attn_qh_l2_mem_eff;
    /* > 0: kbench's scans at 4K-256K also timed with a layer's GEMMs queued behind (";after_layer"),
     * this much slower, and with nothing behind (";after_flush") as the plain rows; and top-ks over 8 rows at
     * 32K-256K both ways, and over scores just written (";after_scores"), topk_scores_l2_us faster */
    double after_layer_us, topk_scores_l2_us;
    double graph_launch_us;
    double hbm_GBps;
    double ce_b2b_gap_us, ce2d_page_row_ns, combine_latency_us, combine_split_ns, combine_l2_latency_us, combine_l2_split_ns;
    double timeslice_us, ctx_switch_us, gather_warm_rows, prefix_latency_us, prefix_eff;
    double l2_dirty_MiB, l2_writeback_GBps;   /* a layer's GEMMs after a memset: + min(W, dirty)/writeback */
} synth_truth_t;

/* The DESIGN.md H200 numbers. */
void synth_default(synth_truth_t *t);

/* Writes link.csv and kernels.csv (fit set, plus kernels rows at n > 256K) and step.csv and
 * concurrency.csv (held out) into dir, times multiplied by (1 + noise_rel·N(0,1)) from a GSL RNG
 * seeded with seed. `device` is the `# device:` header. Returns 0 or -1 (I/O). */
int synth_write_dir(const char *dir, const char *device, const synth_truth_t *t, double noise_rel,
                    unsigned long seed);

/* A fresh temporary directory `<tmp>/odsim-XXXXXX/<leaf>` (created); caller frees the path. */
char *synth_tmpdir(const char *leaf);

/* Removes a directory made by synth_tmpdir with its files (one level). */
void synth_rmdir(const char *dir);

#endif
