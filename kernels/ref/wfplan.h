/* wfplan.h: reverse water-filling (Fathom) and top-r (SparQ) read plans.
 *
 * Channel j's share of score variance is e_j = sum_h q_hj^2 * sigma_j^2.
 * Giving it b plane bits leaves error e_j * 4^-b, so the marginal gain of its
 * (b+1)-th bit is proportional to e_j * 4^-b: candidates (j, b), b = 0..3,
 * ranked by value descending, then j ascending, then b ascending, and the
 * first `budget` taken. The gains of one channel fall geometrically, so the
 * selection is a prefix per channel and greedy is exact.
 * SparQ is the same ranking with decay 1 (every candidate of channel j has
 * value e_j) and budget 4r: the r channels of largest e_j at full depth.
 */
#ifndef KREF_WFPLAN_H
#define KREF_WFPLAN_H

#include <stdint.h>
#include "kref.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Candidate (j, b) is ranked ahead of (j2, b2): the order described above.
 * va, vb are the two candidates' values. */
static inline KREF_HD int kref_wf_ahead(float va, int ja, int ba, float vb, int jb, int bb)
{
    if (va != vb)
        return va > vb;
    if (ja != jb)
        return ja < jb;
    return ba < bb;
}

/* Value of candidate (j, b) of a channel with gain e; decay 4 (Fathom) or 1 (SparQ). */
static inline KREF_HD float kref_wf_value(float e, int b, int decay)
{
    return decay == 4 ? ldexpf(e, -2 * b) : e;
}

/* Per-channel gains e_j = sum over g query heads of q[h][j]^2 * sigma2[j].
 * q is g rows of KREF_D floats; e has KREF_D floats. */
void kref_wf_gains(const float *q, int g, const float *sigma2, float *e);

/* Depths 0..4 for nch channels (nch <= KREF_D) from gains e under a plane-bit
 * budget (0 <= budget <= 4 * nch), by the ranking above. decay is 4 or 1. */
void kref_wf_plan(const float *e, int nch, int budget, int decay, uint8_t *depth);

#ifdef __cplusplus
}
#endif
#endif
