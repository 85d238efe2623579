/* suite_kernels_gemm.cu: the kernels suite's cuBLAS GEMM rows: each of a layer's weights by batch,
 * and the layer's four after dirty lines in the L2. */
#include "misc.h"
#include "gemm.h"
#include "suite_kernels.h"

/* A layer's four GEMMs (batch 1) right after a memset wrote W bytes to HBM, the L2 flushed before:
 * the written lines wait dirty in the L2 until the weights' reads evict them, and their write-back
 * shares HBM with those reads (a sparse step leaves its scores, winners and fetched index so before
 * the O projection and MLP). W = 0 is the layer cold and clean. A 100 us spin (no memory traffic)
 * between the flush and the memset keeps the GPU busy while the host enqueues the four cuBLAS
 * calls, as inside a step, and the memset still ends right before them: without it the window
 * caught the host's enqueue after the flush (full runs: 118-121 us at W <= 8 MiB, out of order,
 * where a quick run had 111-114). */
void ks_sec_gemm_dirty(ks_t *K, kb_gemm_t *g)
{
    static const int mib[] = {0, 4, 8, 16, 24, 32, 40, 48, 64, 96, 128};
    size_t wmax = (size_t)mib[sizeof mib / sizeof *mib - 1] << 20;
    void *buf = ks_dalloc(wmax);
    double bytes = 0;
    for (int w = KB_GEMM_QKV; w <= KB_GEMM_DOWN; w++)
        bytes += kb_gemm_bytes(g, w, 1);
    for (size_t i = 0; i < sizeof mib / sizeof *mib; i++) {
        size_t wb = (size_t)mib[i] << 20;
        int v = (int)i;
        kb_stats_t st = time_it_prep(K, [&](cudaStream_t s) { kb_gemm_layer(g, 1, s); }, 120, [&](cudaStream_t s) {
            kb_l2_flush(s);
            kb_spin(100, s);
            if (wb)
                CK(cudaMemsetAsync(buf, v, wb, s));
        });
        kb_row_t r = kb_row("gemm", "layer_after_write");
        r.batch = 1;
        r.placement = "hbm";
        r.region_bytes = (long long)wb;
        r.bytes_moved = bytes;
        r.ref_gbps = kb_ceil.hbm_gbps;
        ks_put(K, &r, st, 0);
    }
    CK(cudaFree(buf));
}

void ks_sec_gemm(ks_t *K)
{
    const kb_model_t *m = kb_model(K->o->model);
    kb_gemm_t *g = kb_gemm_new(m, 256);
    for (int w = 0; w < KB_GEMM_N; w++)
        for (int b = 1; b <= 256; b *= 2) {
            if (K->o->quick && b != 1 && b != 16 && b != 256)
                continue;
            kb_stats_t st = time_it(K, [&](cudaStream_t s) { kb_gemm_run(g, w, b, s); }, 50, 1);
            kb_row_t r = kb_row("gemm", kb_gemm_name(w));
            r.batch = b;
            r.placement = "hbm";
            r.bytes_moved = kb_gemm_bytes(g, w, b);
            r.ref_gbps = kb_ceil.hbm_gbps;
            ks_put(K, &r, st, kb_gemm_flops(g, w, b));
        }
    ks_sec_gemm_dirty(K, g);
    kb_gemm_free(g);
}
