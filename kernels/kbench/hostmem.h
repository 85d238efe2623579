/* hostmem.h: pinned, GPU-mapped host memory from the allocators under study.
 *
 * Every allocation is page-locked, mapped for the GPU at the same virtual
 * address (UVA), and usable both by copy-engine copies and by kernels reading
 * it directly (SM zero-copy).
 */
#ifndef KB_HOSTMEM_H
#define KB_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    KB_HOSTALLOC = 0,   /* cudaHostAlloc(mapped | portable) */
    KB_REG_THP,         /* mmap + madvise(MADV_HUGEPAGE) + cudaHostRegister */
    KB_REG_HUGETLB,     /* mmap(MAP_HUGETLB, 2 MiB pages) + cudaHostRegister */
    KB_CUMEM_HOST,      /* cuMemCreate(location HOST) + cuMemMap + cuMemSetAccess */
    KB_N_ALLOC
} kb_alloc_t;

typedef struct {
    void *ptr;          /* host and device address */
    size_t bytes;       /* usable bytes */
    size_t mapped;      /* bytes reserved (rounded up) */
    kb_alloc_t kind;
    unsigned long long handle; /* cuMem generic handle, KB_CUMEM_HOST only */
} kb_hostbuf_t;

/* Short name of an allocator, as written in the CSV allocator column. */
const char *kb_alloc_name(kb_alloc_t kind);

/* Allocate and pin bytes of host memory with allocator kind. Returns 0, or -1
 * (with a reason on stderr) when the platform does not offer it; the buffer's
 * contents are unspecified. */
int kb_host_alloc(kb_hostbuf_t *b, size_t bytes, kb_alloc_t kind);

/* Unpin and release a buffer from kb_host_alloc (no-op when ptr is NULL). */
void kb_host_free(kb_hostbuf_t *b);

/* Fill bytes at p (device or mapped host memory, 16-byte aligned, bytes a
 * multiple of 16) with pseudo-random words from seed, on the GPU, and wait. */
void kb_fill_random(void *p, size_t bytes, uint64_t seed);

#endif
