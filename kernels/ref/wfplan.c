/* wfplan.c: C reference of the water-filling and SparQ planners. */
#include "wfplan.h"

void kref_wf_gains(const float *q, int g, const float *sigma2, float *e)
{
    for (int j = 0; j < KREF_D; j++) {
        float acc = 0.0f;
        for (int h = 0; h < g; h++)
            acc += q[h * KREF_D + j] * q[h * KREF_D + j];
        e[j] = acc * sigma2[j];
    }
}

void kref_wf_plan(const float *e, int nch, int budget, int decay, uint8_t *depth)
{
    for (int j = 0; j < nch; j++) {
        depth[j] = 0;
        for (int b = 0; b < KREF_QBITS; b++) {
            float v = kref_wf_value(e[j], b, decay);
            int rank = 0;
            for (int j2 = 0; j2 < nch; j2++)
                for (int b2 = 0; b2 < KREF_QBITS; b2++)
                    rank += kref_wf_ahead(kref_wf_value(e[j2], b2, decay), j2, b2, v, j, b);
            if (rank < budget)
                depth[j]++;
        }
    }
}
