/* topk.cu: top-k by radix select (ref/topk.h), all rows in one set of launches.
 *
 * Per row: three histogram passes over the scores (11, 11 and 10 bits of the
 * order-preserving key); the last block of each pass to finish selects the
 * digit holding the k-th largest (one warp); then one gather pass, which also
 * counts the keys equal to the k-th largest's in each tile of 4096 (its last
 * block turns the counts into each tile's rank), and, where not every tie is
 * taken, one more over the tiles that hold the ties taken. Ties at the k-th
 * largest go by index, lowest first, as the C reference takes them: the same
 * winners every run (they went in the order the atomics came, and quantised
 * scores tie by the thousand). About 4 * 4n bytes read, 6 launches; no host
 * synchronisation.
 */
#include "kbench/kb.h"
#include "kern.h"
#include "ref/topk.h"

typedef struct {
    uint32_t prefix, mask, want, cnt_gt, cnt_eq;
    uint32_t ties;             /* keys equal to the k-th largest's (set by the last pass) */
} topk_state_t;

#define TOPK_RUN 16                     /* consecutive keys a thread takes of a tile */
#define TOPK_TILE (256 * TOPK_RUN)      /* a 256-thread block's keys at once */

struct kb_topk_ws {
    int max_rows;
    size_t max_tiles;          /* over all rows */
    uint32_t *hist;            /* max_rows * KREF_TOPK_BINS */
    topk_state_t *st;          /* max_rows */
    unsigned *done;            /* max_rows: blocks finished in the current pass */
    uint32_t *tie;             /* max_tiles: each tile's ties, then the ties before it in its row */
};

static __host__ __device__ size_t topk_tiles(size_t n)
{
    return (n + TOPK_TILE - 1) / TOPK_TILE;
}

kb_topk_ws_t *kb_topk_ws_new(int max_rows, size_t max_keys)
{
    kb_topk_ws_t *w = (kb_topk_ws_t *)calloc(1, sizeof *w);
    w->max_rows = max_rows;
    w->max_tiles = max_keys / TOPK_TILE + (size_t)max_rows + 1;   /* each row rounds up once */
    CK(cudaMalloc(&w->tie, w->max_tiles * sizeof(uint32_t)));
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
    CK(cudaFree(w->tie));
    free(w);
}

__global__ void topk_init_kernel(topk_state_t *st, uint32_t *hist, unsigned *done, uint32_t *tie,
                                 size_t tiles, int k)
{
    int r = blockIdx.x;
    for (int i = threadIdx.x; i < KREF_TOPK_BINS; i += blockDim.x)
        hist[r * KREF_TOPK_BINS + i] = 0;
    for (size_t t = threadIdx.x; t < tiles; t += blockDim.x)
        tie[r * tiles + t] = 0;
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

/* Whether this block is the last of its row's grid to get here (every block's writes before it then
 * visible to it); done counts the row's blocks. Every thread of the block calls it. */
__device__ bool topk_row_last_block(unsigned *done)
{
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    __syncthreads();
    return last;
}

__global__ void topk_hist_kernel1(const float *__restrict__ x, size_t n, int pass, topk_state_t *st,
                                  uint32_t *hist, unsigned *done)
{
    __shared__ uint32_t h[KREF_TOPK_BINS];
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
    if (!topk_row_last_block(&done[r]))
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

/* The TOPK_RUN keys of row xr (n keys) from i0 on, keys past n as 0 (below every score's key:
 * never above nor equal to a k-th largest's, which is at least the smallest score's). */
__device__ void topk_run_keys(const float *__restrict__ xr, size_t n, size_t i0, uint32_t *key)
{
    if (n % 4 == 0 && i0 + TOPK_RUN <= n) {
        const float4 *v = (const float4 *)(xr + i0);
#pragma unroll
        for (int j = 0; j < TOPK_RUN / 4; j++) {
            float4 f = v[j];
            key[4 * j] = kref_topk_key(f.x);
            key[4 * j + 1] = kref_topk_key(f.y);
            key[4 * j + 2] = kref_topk_key(f.z);
            key[4 * j + 3] = kref_topk_key(f.w);
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < TOPK_RUN; e++)
        key[e] = i0 + e < n ? kref_topk_key(xr[i0 + e]) : 0u;
}

/* What the block's threads before this one hold of `mine` in all (256 threads, every one calling). */
__device__ uint32_t topk_block_before(uint32_t mine)
{
    __shared__ uint32_t warps[8];
    int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    uint32_t incl = mine;
    for (int o = 1; o < 32; o *= 2) {
        uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o)
            incl += v;
    }
    if (lane == 31)
        warps[wid] = incl;
    __syncthreads();
    uint32_t before = incl - mine;
    for (int w = 0; w < wid; w++)
        before += warps[w];
    return before;
}

/* Exclusive scan in place of the row's tiles' tie counts (256 threads, one block): a tile's count
 * becomes the ties in the tiles before it. */
__device__ void topk_rank_tiles(uint32_t *tie, size_t tiles)
{
    size_t per = (tiles + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per;
    size_t hi = lo + per < tiles ? lo + per : tiles;
    uint32_t mine = 0;
    for (size_t t = lo; t < hi; t++)
        mine += __ldcg(&tie[t]);
    uint32_t before = topk_block_before(mine);
    for (size_t t = lo; t < hi; t++) {
        uint32_t c = __ldcg(&tie[t]);
        tie[t] = before;
        before += c;
    }
}

/* Block b of row r covers tiles [b * span, (b + 1) * span) of TOPK_TILE keys: the keys above the
 * k-th largest's to idx in any order; its ties too when all are taken, else each tile's count of
 * them to tie[r][tile], which the row's last block to finish ranks (topk_rank_tiles). */
__global__ void topk_gather_kernel2(const float *__restrict__ x, size_t n, size_t span, int k,
                                    topk_state_t *st, uint32_t *__restrict__ idx, uint32_t *tie,
                                    unsigned *done)
{
    int r = blockIdx.y;
    uint32_t tau = st[r].prefix, want = st[r].want;
    bool all = st[r].ties == want;
    const float *xr = x + r * n;
    uint32_t *out = idx + (size_t)r * k;
    size_t tiles = topk_tiles(n), t0 = blockIdx.x * span, t1 = t0 + span < tiles ? t0 + span : tiles;
    uint32_t *rt = tie + r * tiles;
    for (size_t t = t0; t < t1; t++) {
        size_t i0 = t * TOPK_TILE + (size_t)threadIdx.x * TOPK_RUN;
        uint32_t key[TOPK_RUN], mine = 0;
        topk_run_keys(xr, n, i0, key);
#pragma unroll
        for (int e = 0; e < TOPK_RUN; e++) {
            if (key[e] > tau)
                out[atomicAdd(&st[r].cnt_gt, 1u)] = (uint32_t)(i0 + e);
            else if (key[e] == tau && all)
                out[k - want + atomicAdd(&st[r].cnt_eq, 1u)] = (uint32_t)(i0 + e);
            else if (key[e] == tau)
                mine++;
        }
        mine = __reduce_add_sync(0xffffffffu, mine);
        if (threadIdx.x % 32 == 0 && mine)
            atomicAdd(&rt[t], mine);
    }
    if (all)
        return;
    if (!topk_row_last_block(&done[r]))
        return;
    topk_rank_tiles(rt, tiles);
    if (threadIdx.x == 0)
        done[r] = 0;
}

/* Where not every tie is taken: block (t, r) takes the ties of tile t of row r in index order,
 * ranked after those of the tiles before it (topk_rank_tiles), while the rank is below want
 * (the lowest indices, as the reference). Tiles with none to take return at once, so only the
 * tiles holding taken ties are read, all at once. Variant 1 took a block's span 256 keys a tile
 * with three barriers each, one tile after another (450 us more over HashAttention's 32 rows of
 * 2M); variant 2 16 consecutive keys a thread a tile, still one tile after another (115 us). */
__global__ void topk_ties_kernel3(const float *__restrict__ x, size_t n, int k, const topk_state_t *st,
                                  uint32_t *__restrict__ idx, const uint32_t *tie)
{
    int r = blockIdx.y;
    size_t t = blockIdx.x, tiles = topk_tiles(n);
    uint32_t want = st[r].want, ties = st[r].ties;
    if (ties == want)
        return;
    uint32_t base = tie[r * tiles + t], next = t + 1 < tiles ? tie[r * tiles + t + 1] : ties;
    if (base >= want || next == base)
        return;
    uint32_t tau = st[r].prefix, key[TOPK_RUN], mask = 0;
    size_t i0 = t * TOPK_TILE + (size_t)threadIdx.x * TOPK_RUN;
    topk_run_keys(x + r * n, n, i0, key);
#pragma unroll
    for (int e = 0; e < TOPK_RUN; e++)
        mask |= (uint32_t)(key[e] == tau) << e;
    uint32_t rank = base + topk_block_before(__popc(mask));
    uint32_t *out = idx + (size_t)r * k + (k - want);
    for (; mask && rank < want; mask &= mask - 1, rank++)
        out[rank] = (uint32_t)(i0 + __ffs(mask) - 1);
}

void kb_topk(const float *x, int rows, size_t n, int k, uint32_t *idx, kb_topk_ws_t *w,
             cudaStream_t s)
{
    size_t tiles = topk_tiles(n);
    if (rows > w->max_rows || (size_t)rows * tiles > w->max_tiles)
        kb_die("kb_topk: more rows or keys than its scratch was made for", __FILE__, __LINE__);
    int per_row = (int)tiles, cap = 4 * kb_sm_count() / rows;
    cap = cap < 1 ? 1 : cap;
    per_row = per_row > cap ? cap : per_row;
    size_t span = (tiles + per_row - 1) / per_row;     /* tiles a gather block takes */
    dim3 grid((unsigned)((tiles + span - 1) / span), rows);
    topk_init_kernel<<<rows, 256, 0, s>>>(w->st, w->hist, w->done, w->tie, tiles, k);
    CKL();
    for (int pass = 0; pass < KREF_TOPK_PASSES; pass++) {
        topk_hist_kernel1<<<grid, 256, 0, s>>>(x, n, pass, w->st, w->hist, w->done);
        CKL();
    }
    topk_gather_kernel2<<<grid, 256, 0, s>>>(x, n, span, k, w->st, idx, w->tie, w->done);
    CKL();
    topk_ties_kernel3<<<dim3((unsigned)tiles, rows), 256, 0, s>>>(x, n, k, w->st, idx, w->tie);
    CKL();
}
