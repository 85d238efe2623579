/* kref.h: small pieces shared by the C references and the CUDA kernels.
 *
 * Everything here is a static inline function usable from C11 (gcc) and from
 * CUDA device code (nvcc, where KREF_HD expands to __host__ __device__), so
 * the quantiser, the half/bf16 conversions and the synthetic data generator
 * are the same code on both sides and give bit-identical results.
 */
#ifndef KREF_H
#define KREF_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define KREF_HD __host__ __device__
#else
#define KREF_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Head dimension of every model odsim lists (DESIGN.md, Shapes). */
#define KREF_D 128
/* Tokens sharing one fp16 scale (Fathom planes and per-token indexes). */
#define KREF_SCALE_TOKENS 64
/* Bits per channel of the full quantiser (4 bit planes). */
#define KREF_QBITS 4

static inline KREF_HD uint32_t kref_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline KREF_HD float kref_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float -> IEEE half, round to nearest even (same as CUDA's __float2half_rn). */
static inline KREF_HD uint16_t kref_f32_to_f16(float f)
{
    uint32_t x = kref_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);            /* NaN */
    if (ax >= 0x47800000u)
        return (uint16_t)(sign | 0x7c00u);            /* >= 65536: inf */
    if (ax < 0x38800000u) {                           /* half subnormal or 0 */
        if (ax < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t s = 126u - e;
        uint32_t h = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
        if (rem > half || (rem == half && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13));
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;                                          /* may carry into inf */
    return (uint16_t)(sign | h);
}

/* IEEE half -> float (exact). */
static inline KREF_HD float kref_f16_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));   /* the same value, one instruction */
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);    /* m * 2^-24 */
        return sign ? -v : v;
    }
    if (e == 31)
        return kref_bits_f32(sign | 0x7f800000u | (m << 13));
    return kref_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

/* float -> bf16, round to nearest even. */
static inline KREF_HD uint16_t kref_f32_to_bf16(float f)
{
    uint32_t x = kref_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline KREF_HD float kref_bf16_to_f32(uint16_t b)
{
    return kref_bits_f32((uint32_t)b << 16);
}

/* splitmix64 finaliser: a counter-based hash, so data can be generated in
 * parallel (GPU) or sequentially (CPU) from the same (seed, index). */
static inline KREF_HD uint64_t kref_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in (0, 1), never 0 or 1. */
static inline KREF_HD float kref_unif(uint64_t seed, uint64_t i)
{
    uint32_t r = (uint32_t)(kref_mix64(seed * 0x100000001b3ull ^ i) >> 40);
    return ((float)r + 0.5f) * (1.0f / 16777216.0f);
}

/* Standard normal from two hashed uniforms (Box-Muller). */
static inline KREF_HD float kref_normal(uint64_t seed, uint64_t i)
{
    float u1 = kref_unif(seed, 2 * i), u2 = kref_unif(seed, 2 * i + 1);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

/* Synthetic keys: per-channel standard deviation, heavy-tailed.
 * Channel j has sigma_j = exp(0.75 * z_j), z_j a fixed standard normal drawn
 * from hash(j) (log-normal spread: a few channels several times the median),
 * and the four outlier channels j = 5, 37, 69, 101 get 8x on top, as the
 * massive-activation channels of real keys. Contract: j in [0, KREF_D). */
static inline KREF_HD float kref_key_sigma(int j)
{
    float s = expf(0.75f * kref_normal(0x5157u, (uint64_t)j));
    return (j % 32 == 5) ? 8.0f * s : s;
}

/* One synthetic key element for (token, channel) under a seed. */
static inline KREF_HD float kref_key(uint64_t seed, uint64_t token, int j)
{
    return kref_key_sigma(j) * kref_normal(seed, token * KREF_D + (uint64_t)j);
}

#ifdef __cplusplus
}
#endif
#endif
