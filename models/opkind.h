/* opkind — the names of op kinds, shared by the plan providers, the calibration profile and measured
 * CSVs (whose `op` column uses the same strings; a test checks every committed row). */
#ifndef ODSIM_MODELS_OPKIND_H
#define ODSIM_MODELS_OPKIND_H

#define OPKIND_LIST(X) \
    X(H2D_COPY, "h2d_copy")         /* copy-engine host→device copy */        \
    X(D2H_COPY, "d2h_copy")         /* copy-engine device→host copy */        \
    X(H2D_COPY2D, "h2d_copy2d")     /* cudaMemcpy2DAsync, strided pieces */    \
    X(H2D_BATCH, "h2d_batch")       /* cudaMemcpyBatchAsync, random pieces */  \
    X(SM_GATHER, "sm_gather")       /* kernel reading mapped pinned host memory */ \
    X(INDEX_FETCH, "index_fetch")   /* the scan index brought from host */     \
    X(QUANTIZE, "quantize")         /* 4-bit quantisation into bit planes */   \
    X(WF_PLAN, "wf_plan")           /* per-query water-filling plan */         \
    X(SCAN, "scan")                 /* approximate scores over the index */    \
    X(TOPK, "topk")                 /* top-k selection */                      \
    X(WINNER_FETCH, "winner_fetch") /* the selected K/V rows or pages */       \
    X(ATTN_SPARSE, "attn_sparse")   /* attention over the winners */           \
    X(ATTN_DENSE, "attn_dense")     /* dense decode attention (split-K) */     \
    X(ATTN_TAIL, "attn_tail")       /* dense attention over the HBM tail */    \
    X(ATTN_COMBINE, "attn_combine") /* merge of the split-K partials */        \
    X(FLUSH, "flush")               /* completed block device→host */          \
    X(GEMM, "gemm")                 /* projections and MLP */                  \
    X(LM_HEAD, "lm_head")           /* LM head per step */                     \
    X(SAMPLE, "sample")             /* sampling per step */                    \
    X(LAUNCH, "launch")             /* kernel launch overhead */               \
    X(GRAPH_REPLAY, "graph_replay") /* CUDA graph replay overhead */           \
    X(LAYER_STEP, "layer_step")     /* a whole offloaded layer step (measured) */ \
    X(SESSION_STEP, "session_step") /* a session's step under concurrency (measured) */ \
    X(TIMESLICE, "timeslice")       /* runs and switch-outs of time-sliced contexts (measured) */ \
    X(L2_WRITEBACK, "l2_writeback") /* dirty L2 lines written back under the next GEMM */ \
    X(PREFILL_CHUNK, "prefill_chunk") /* a whole prefill chunk over every layer (measured) */ \
    X(HBM_STREAM, "hbm_stream")     /* a kernel streaming HBM (replay workloads) */ \
    X(COMPUTE, "compute")           /* an FP32 compute kernel (replay workloads) */ \
    X(SPIN, "spin")                 /* a kernel of a set duration (replay workloads) */ \
    X(HOST_BUSY, "host_busy")       /* the host thread busy (replay workloads) */

typedef enum {
#define OPKIND_ENUM(id, name) OPKIND_##id,
    OPKIND_LIST(OPKIND_ENUM)
#undef OPKIND_ENUM
    OPKIND_COUNT
} opkind_t;

/* Name of kind k ("?" when out of range). */
const char *opkind_name(int k);
/* Kind named `name`, or -1. */
int opkind_find(const char *name);

#endif
