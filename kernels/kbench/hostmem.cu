/* hostmem.cu: host allocators (see hostmem.h). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include "kb.h"
#include "hostmem.h"
#include "ref/kref.h"

#define HUGE_2M ((size_t)2 << 20)

const char *kb_alloc_name(kb_alloc_t kind)
{
    static const char *names[KB_N_ALLOC] = {"hostalloc", "register_thp", "register_hugetlb",
                                            "cumem_host"};
    return names[kind];
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static int register_mmap(kb_hostbuf_t *b, int hugetlb)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (hugetlb ? MAP_HUGETLB : 0);
    void *p = mmap(NULL, b->mapped, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "kbench: %s: mmap of %zu bytes failed\n", kb_alloc_name(b->kind),
                b->mapped);
        return -1;
    }
    if (!hugetlb && madvise(p, b->mapped, MADV_HUGEPAGE) != 0)
        fprintf(stderr, "kbench: register_thp: madvise(MADV_HUGEPAGE) refused\n");
    memset(p, 0x11, b->mapped);     /* fault the pages in (as huge pages where granted) */
    cudaError_t e = cudaHostRegister(p, b->mapped, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        fprintf(stderr, "kbench: %s: cudaHostRegister: %s\n", kb_alloc_name(b->kind),
                cudaGetErrorString(e));
        munmap(p, b->mapped);
        return -1;
    }
    b->ptr = p;
    return 0;
}

/* The driver API's cuMem calls, looked up through the runtime: kbench links no libcuda, so that it
 * starts where no driver is installed (`kbench replay --check` on a machine without a GPU). */
static struct {
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemRelease_v10020 release;
} drv;

static int drv_load(void)
{
    struct {
        const char *name;
        void **fn;
    } t[] = {{"cuMemGetAllocationGranularity", (void **)&drv.granularity}, {"cuMemCreate", (void **)&drv.create},
             {"cuMemAddressReserve", (void **)&drv.reserve}, {"cuMemMap", (void **)&drv.map},
             {"cuMemSetAccess", (void **)&drv.set_access}, {"cuMemUnmap", (void **)&drv.unmap},
             {"cuMemAddressFree", (void **)&drv.address_free}, {"cuMemRelease", (void **)&drv.release}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        enum cudaDriverEntryPointQueryResult q;
        if (*t[i].fn)
            continue;
        if (cudaGetDriverEntryPointByVersion(t[i].name, t[i].fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            fprintf(stderr, "kbench: cumem_host: the driver offers no %s\n", t[i].name);
            *t[i].fn = NULL;
            return -1;
        }
    }
    return 0;
}

static int cumem_host(kb_hostbuf_t *b)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    size_t gran = 0;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h;
    if (drv_load() != 0)
        return -1;
    if (drv.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS)
        gran = HUGE_2M;
    b->mapped = round_up(b->bytes, gran);
    CUresult r = drv.create(&h, b->mapped, &prop, 0);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "kbench: cumem_host: cuMemCreate failed (%d)\n", (int)r);
        return -1;
    }
    CUmemAccessDesc acc[2];
    memset(acc, 0, sizeof acc);
    acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc[0].location.id = 0;
    acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST;
    acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = drv.reserve(&va, b->mapped, gran, 0, 0)) != CUDA_SUCCESS ||
        (r = drv.map(va, b->mapped, 0, h, 0)) != CUDA_SUCCESS ||
        (r = drv.set_access(va, b->mapped, acc, 2)) != CUDA_SUCCESS) {
        fprintf(stderr, "kbench: cumem_host: reserve/map/set access failed (%d)\n", (int)r);
        if (va)
            drv.address_free(va, b->mapped);
        drv.release(h);
        return -1;
    }
    b->ptr = (void *)va;
    b->handle = (unsigned long long)h;
    return 0;
}

int kb_host_alloc(kb_hostbuf_t *b, size_t bytes, kb_alloc_t kind)
{
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    b->kind = kind;
    b->mapped = round_up(bytes, HUGE_2M);
    switch (kind) {
    case KB_HOSTALLOC: {
        cudaError_t e = cudaHostAlloc(&b->ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
        if (e != cudaSuccess) {
            fprintf(stderr, "kbench: hostalloc: %s\n", cudaGetErrorString(e));
            b->ptr = NULL;
            return -1;
        }
        return 0;
    }
    case KB_REG_THP:
        return register_mmap(b, 0);
    case KB_REG_HUGETLB:
        return register_mmap(b, 1);
    case KB_CUMEM_HOST:
        return cumem_host(b);
    default:
        return -1;
    }
}

void kb_host_free(kb_hostbuf_t *b)
{
    if (!b->ptr)
        return;
    switch (b->kind) {
    case KB_HOSTALLOC:
        CK(cudaFreeHost(b->ptr));
        break;
    case KB_REG_THP:
    case KB_REG_HUGETLB:
        CK(cudaHostUnregister(b->ptr));
        munmap(b->ptr, b->mapped);
        break;
    case KB_CUMEM_HOST:
        drv.unmap((CUdeviceptr)b->ptr, b->mapped);
        drv.address_free((CUdeviceptr)b->ptr, b->mapped);
        drv.release((CUmemGenericAllocationHandle)b->handle);
        break;
    default:
        break;
    }
    b->ptr = NULL;
}

__global__ void fill_kernel1(uint4 *p, size_t n16, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t a = kref_mix64(seed ^ (2 * i)), b = kref_mix64(seed ^ (2 * i + 1));
        p[i] = make_uint4((uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32));
    }
}

void kb_fill_random(void *p, size_t bytes, uint64_t seed)
{
    fill_kernel1<<<4 * kb_sm_count(), 256>>>((uint4 *)p, bytes / 16, seed);
    CKL();
    CK(cudaDeviceSynchronize());
}
