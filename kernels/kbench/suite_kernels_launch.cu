/* suite_kernels_launch.cu: the kernels suite's launch rows: an empty kernel back to back and its host
 * enqueue, a kernel after a copy or a kernel, event chains, copy enqueue and graph replay. */
#include <time.h>
#include "kern.h"
#include "misc.h"
#include "suite_kernels.h"

static double wall_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A chain of kernels that fill the GPU (3 us each), back to back (`chain`) and with an event
 * recorded after each (`chain_events`, as the step suite times its stages), behind a 1 ms spin so
 * that the host has enqueued them all: the difference over the chain's length is what an event
 * between two kernels costs it. */
#define EVENT_CHAIN 32
void ks_sec_event_chain(ks_t *K)
{
    cudaEvent_t ev[EVENT_CHAIN];
    for (int j = 0; j < EVENT_CHAIN; j++)
        CK(cudaEventCreate(&ev[j]));
    for (int with = 0; with < 2; with++) {
        kb_stats_t st = time_it_prep(K, [&](cudaStream_t s) {
            for (int j = 0; j < EVENT_CHAIN; j++) {
                kb_fill_spin(3, s);
                if (with)
                    CK(cudaEventRecord(ev[j], s));
            }
        }, EVENT_CHAIN * 5, [&](cudaStream_t s) {
            kb_l2_flush(s);
            kb_spin(1000, s);
        });
        kb_row_t r = kb_row("launch", with ? "chain_events" : "chain");
        r.pieces = EVENT_CHAIN;
        ks_put(K, &r, st, EVENT_CHAIN);
    }
    for (int j = 0; j < EVENT_CHAIN; j++)
        CK(cudaEventDestroy(ev[j]));
}

void ks_sec_launch(ks_t *K)
{
    int n = K->o->quick ? 1000 : 10000;
    /* host-side cost per launch (back to back, no sync), and device time per launch */
    double t0 = wall_us();
    for (int i = 0; i < n; i++)
        kb_empty_launch(K->s);
    double host_us = (wall_us() - t0) / n;
    CK(cudaStreamSynchronize(K->s));
    kb_stats_t st = time_it(K, [&](cudaStream_t s) {
        for (int i = 0; i < 100; i++)
            kb_empty_launch(s);
    }, 300, 0);
    kb_row_t r = kb_row("launch", "empty_b2b");
    r.pieces = 100;
    r.st = st;
    r.per_s = 100 / (st.med * 1e-6);
    kb_csv_row(K->csv, &r);
    kb_row_t h = kb_row("launch", "host_enqueue");
    h.pieces = 1;
    h.st.reps = n;
    h.st.med = h.st.p10 = h.st.p90 = h.st.p99 = h.st.mean = host_us;
    h.per_s = 1e6 / host_us;
    kb_csv_row(K->csv, &h);
    /* host-side cost per copy issue: 4 KiB pinned H2D copies back to back, no sync */
    void *hsrc, *ddst;
    CK(cudaHostAlloc(&hsrc, 4096, cudaHostAllocDefault));
    CK(cudaMalloc(&ddst, 4096));
    int nc = n / 10;
    t0 = wall_us();
    for (int i = 0; i < nc; i++)
        CK(cudaMemcpyAsync(ddst, hsrc, 4096, cudaMemcpyHostToDevice, K->s));
    double copy_us = (wall_us() - t0) / nc;
    CK(cudaStreamSynchronize(K->s));
    /* A kernel right after a copy in its stream, timed from an event after the copy (as a step's
     * stage after its index copy), against the same kernel after a kernel (the flush): the
     * difference is the copy engine's hand-off to the SMs. */
    for (int after_copy = 0; after_copy < 2; after_copy++) {
        kb_stats_t hs = time_it_prep(K, [&](cudaStream_t s) { kb_empty_launch(s); }, 10, [&](cudaStream_t s) {
            kb_l2_flush(s);
            if (after_copy)
                CK(cudaMemcpyAsync(ddst, hsrc, 4096, cudaMemcpyHostToDevice, s));
        });
        kb_row_t hr = kb_row("launch", after_copy ? "after_copy" : "after_kernel");
        hr.pieces = 1;
        if (after_copy) {
            hr.piece_bytes = 4096;
            hr.allocator = "hostalloc";
        }
        ks_put(K, &hr, hs, 1);
    }
    CK(cudaFreeHost(hsrc));
    CK(cudaFree(ddst));
    ks_sec_event_chain(K);
    kb_row_t hc = kb_row("launch", "copy_enqueue");
    hc.pieces = 1;
    hc.piece_bytes = 4096;
    hc.allocator = "hostalloc";
    hc.st.reps = nc;
    hc.st.med = hc.st.p10 = hc.st.p90 = hc.st.p99 = hc.st.mean = copy_us;
    hc.per_s = 1e6 / copy_us;
    kb_csv_row(K->csv, &hc);
    int sizes[] = {1, 10, 100};
    for (int i = 0; i < 3; i++) {
        cudaGraph_t gr;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(K->s, cudaStreamCaptureModeThreadLocal));
        for (int j = 0; j < sizes[i]; j++)
            kb_empty_launch(K->s);
        CK(cudaStreamEndCapture(K->s, &gr));
        CK(cudaGraphInstantiate(&ge, gr, 0));
        kb_stats_t gs = time_it(K, [&](cudaStream_t s) { CK(cudaGraphLaunch(ge, s)); }, 10, 0);
        kb_row_t g = kb_row("graph_replay", "empty_nodes");
        g.pieces = sizes[i];
        ks_put(K, &g, gs, sizes[i]);
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(gr));
    }
}
