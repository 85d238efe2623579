/* topk.cu: top-k by radix select (ref/topk.h), all rows in one set of launches.
 *
 * Per row: three histogram passes over the scores (11, 11 and 10 bits of the
 * order-preserving key); the last block of each pass to finish selects the
 * digit holding the k-th largest (one warp); then one gather pass, and one
 * more over the blocks whose ties are taken when not all of them are. Ties
 * at the k-th largest go by index, lowest first, as the C reference takes
 * them: the same winners every run (they went in the order the atomics
 * came, and quantised scores tie by the thousand). About 4 * 4n bytes read,
 * 6 launches; no host synchronisation.
 */
#include "kb.h"
#include "kern.h"
#include "ref/topk.h"

typedef struct {
    uint32_t prefix, mask, want, cnt_gt, cnt_eq;
    uint32_t ties;             /* keys equal to the k-th largest's (set by the last pass) */
} topk_state_t;

struct kb_topk_ws {
    int max_rows, max_blocks;
    uint32_t *hist;            /* max_rows * KREF_TOPK_BINS */
    topk_state_t *st;          /* max_rows */
    unsigned *done;            /* max_rows: blocks finished in the current pass */
    uint32_t *eq;              /* max_blocks: ties in each gather block's span */
};

kb_topk_ws_t *kb_topk_ws_new(int max_rows)
{
    kb_topk_ws_t *w = (kb_topk_ws_t *)calloc(1, sizeof *w);
    w->max_rows = max_rows;
    w->max_blocks = max_rows * (4 * kb_sm_count() > 1 ? 4 * kb_sm_count() : 1);
    CK(cudaMalloc(&w->eq, (size_t)w->max_blocks * sizeof(uint32_t)));
    CK(cudaMalloc(&w->hist, (size_t)max_rows * KREF_TOPK_BINS * sizeof(uint32_t)));
    CK(cudaMalloc(&w->st, (size_t)max_rows * sizeof(topk_state_t)));
    CK(cudaMalloc(&w->done, (size_t)max_rows * sizeof(unsigned)));
    return w;
}

void kb_topk_ws_free(kb_topk_ws_t *w)
{
    CK(cudaFree(w->hist));
    CK(cudaFree(w->st));
    CK(cudaFree(w->done));
    CK(cudaFree(w->eq));
    free(w);
}

__global__ void topk_init_kernel(topk_state_t *st, uint32_t *hist, unsigned *done, int k)
{
    int r = blockIdx.x;
    for (int i = threadIdx.x; i < KREF_TOPK_BINS; i += blockDim.x)
        hist[r * KREF_TOPK_BINS + i] = 0;
    if (threadIdx.x == 0) {
        topk_state_t s = {0u, 0u, (uint32_t)k, 0u, 0u, 0u};
        st[r] = s;
        done[r] = 0;
    }
}

/* One warp: lane l owns bins [64 l, 64 l + 64) of h (the row's histogram,
 * already in shared memory); find the digit d with count(> d) < want <=
 * count(>= d), counting from the top bin down, and update the row's state. */
__device__ void topk_select(int pass, topk_state_t *st, const uint32_t *h, int lane)
{
    int nb = 1 << kref_topk_bits(pass), per = nb / 32;
    uint32_t mine = 0;
    for (int i = 0; i < per; i++)
        mine += h[lane * per + i];
    uint32_t above = mine;                   /* inclusive sum over lanes >= lane */
    for (int o = 1; o < 32; o *= 2) {
        uint32_t v = __shfl_down_sync(0xffffffffu, above, o);
        if (lane + o < 32)
            above += v;
    }
    uint32_t want = st->want;
    uint32_t higher = above - mine;          /* count in the lanes above mine */
    if (higher < want && above >= want) {
        uint32_t acc = higher;
        int d = lane * per + per - 1;
        while (acc + h[d] < want) {
            acc += h[d];
            d--;
        }
        int sh = kref_topk_shift(pass);
        st->prefix |= (uint32_t)d << sh;
        st->mask |= (uint32_t)(nb - 1) << sh;
        st->want = want - acc;
        if (pass == KREF_TOPK_PASSES - 1)
            st->ties = h[d];
    }
}

__global__ void topk_hist_kernel1(const float *__restrict__ x, size_t n, int pass, topk_state_t *st,
                                  uint32_t *hist, unsigned *done)
{
    __shared__ uint32_t h[KREF_TOPK_BINS];
    __shared__ bool last;
    int r = blockIdx.y;
    for (int i = threadIdx.x; i < KREF_TOPK_BINS; i += blockDim.x)
        h[i] = 0;
    __syncthreads();
    uint32_t prefix = st[r].prefix, mask = st[r].mask;
    int sh = kref_topk_shift(pass);
    uint32_t dm = (1u << kref_topk_bits(pass)) - 1;
    const float *xr = x + r * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t key = kref_topk_key(xr[i]);
        if ((key & mask) == prefix)
            atomicAdd(&h[(key >> sh) & dm], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < KREF_TOPK_BINS; i += blockDim.x)
        if (h[i])
            atomicAdd(&hist[r * KREF_TOPK_BINS + i], h[i]);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(&done[r], 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last)
        return;
    /* every block's counts are in: the row's histogram to shared memory (and
     * cleared for the next pass), then one warp selects the digit */
    uint32_t *g = hist + r * KREF_TOPK_BINS;
    for (int i = threadIdx.x; i < KREF_TOPK_BINS; i += blockDim.x) {
        h[i] = __ldcg(&g[i]);
        g[i] = 0;
    }
    __syncthreads();
    if (threadIdx.x < 32)
        topk_select(pass, &st[r], h, threadIdx.x);
    if (threadIdx.x == 0)
        done[r] = 0;
}

/* Block b of row r covers [b * span, (b + 1) * span): the keys above the k-th largest's to idx in
 * any order; its ties too when all are taken, else their count in its span to eq[r][b]. */
__global__ void topk_gather_kernel1(const float *__restrict__ x, size_t n, size_t span, int k,
                                    topk_state_t *st, uint32_t *__restrict__ idx, uint32_t *eq)
{
    int r = blockIdx.y;
    uint32_t tau = st[r].prefix, want = st[r].want;
    bool all = st[r].ties == want;
    const float *xr = x + r * n;
    uint32_t *out = idx + (size_t)r * k;
    size_t lo = blockIdx.x * span, hi = lo + span < n ? lo + span : n;
    uint32_t mine = 0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        uint32_t key = kref_topk_key(xr[i]);
        if (key > tau)
            out[atomicAdd(&st[r].cnt_gt, 1u)] = (uint32_t)i;
        else if (key == tau && all)
            out[k - want + atomicAdd(&st[r].cnt_eq, 1u)] = (uint32_t)i;
        else if (key == tau)
            mine++;
    }
    if (all)
        return;
    mine = __reduce_add_sync(0xffffffffu, mine);
    __shared__ uint32_t warps[32];
    if (threadIdx.x % 32 == 0)
        warps[threadIdx.x / 32] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t sum = 0;
        for (int w = 0; w < (int)blockDim.x / 32; w++)
            sum += warps[w];
        eq[r * gridDim.x + blockIdx.x] = sum;
    }
}

/* Where not every tie is taken: block b takes the ties of its span in index order, ranked after
 * those of the blocks before it, while the rank is below want (the lowest indices, as the
 * reference). The span goes in tiles of 256 threads x TOPK_TIE_RUN consecutive keys, each thread
 * loading its run before the block's scan of the counts: variant 1 went 256 keys a tile, three
 * barriers each, and took 450 us over 32 rows of 2M heavily tied keys (HashAttention's scores). */
#define TOPK_TIE_RUN 16

__device__ uint32_t topk_ties_base(const uint32_t *eq)
{
    __shared__ uint32_t part[8];
    uint32_t s = 0;
    for (unsigned j = threadIdx.x; j < blockIdx.x; j += blockDim.x)
        s += eq[blockIdx.y * gridDim.x + j];
    s = __reduce_add_sync(0xffffffffu, s);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = s;
    __syncthreads();
    uint32_t b = 0;
    for (int w = 0; w < (int)blockDim.x / 32; w++)
        b += part[w];
    return b;
}

__global__ void topk_ties_kernel2(const float *__restrict__ x, size_t n, size_t span, int k,
                                  const topk_state_t *st, uint32_t *__restrict__ idx, const uint32_t *eq)
{
    int r = blockIdx.y;
    uint32_t tau = st[r].prefix, want = st[r].want;
    if (st[r].ties == want)
        return;
    uint32_t base = topk_ties_base(eq);
    __shared__ uint32_t warps[8];
    const float *xr = x + r * n;
    uint32_t *out = idx + (size_t)r * k + (k - want);
    size_t lo = blockIdx.x * span, hi = lo + span < n ? lo + span : n;
    int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    for (size_t t = lo; t < hi && base < want; t += (size_t)blockDim.x * TOPK_TIE_RUN) {
        size_t i0 = t + (size_t)threadIdx.x * TOPK_TIE_RUN;
        uint32_t tie = 0;
#pragma unroll
        for (int e = 0; e < TOPK_TIE_RUN; e++)
            if (i0 + e < hi && kref_topk_key(xr[i0 + e]) == tau)
                tie |= 1u << e;
        uint32_t c = __popc(tie), incl = c;
        for (int o = 1; o < 32; o *= 2) {
            uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o)
                incl += v;
        }
        if (lane == 31)
            warps[wid] = incl;
        __syncthreads();
        uint32_t rank = base + incl - c, total = 0;
        for (int w = 0; w < (int)blockDim.x / 32; w++) {
            rank += w < wid ? warps[w] : 0;
            total += warps[w];
        }
        for (; tie && rank < want; tie &= tie - 1, rank++)
            out[rank] = (uint32_t)(i0 + __ffs(tie) - 1);
        base += total;
        __syncthreads();
    }
}

void kb_topk(const float *x, int rows, size_t n, int k, uint32_t *idx, kb_topk_ws_t *w,
             cudaStream_t s)
{
    int per_row = (int)((n + 4095) / 4096), cap = 4 * kb_sm_count() / rows;
    cap = cap < 1 ? 1 : cap;
    per_row = per_row > cap ? cap : per_row;
    dim3 grid(per_row < 1 ? 1 : per_row, rows);
    topk_init_kernel<<<rows, 256, 0, s>>>(w->st, w->hist, w->done, k);
    CKL();
    for (int pass = 0; pass < KREF_TOPK_PASSES; pass++) {
        topk_hist_kernel1<<<grid, 256, 0, s>>>(x, n, pass, w->st, w->hist, w->done);
        CKL();
    }
    size_t span = (n + grid.x - 1) / grid.x;
    topk_gather_kernel1<<<grid, 256, 0, s>>>(x, n, span, k, w->st, idx, w->eq);
    CKL();
    topk_ties_kernel2<<<grid, 256, 0, s>>>(x, n, span, k, w->st, idx, w->eq);
    CKL();
}
