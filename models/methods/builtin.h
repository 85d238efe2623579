/* builtin — the tables of the attention methods built into odsim, for the registry
 * (models/methods/registry.c) alone: everything else finds a method by name or kind. */
#ifndef ODSIM_MODELS_METHODS_BUILTIN_H
#define ODSIM_MODELS_METHODS_BUILTIN_H

#include "models/method_ops.h"

extern const method_ops_t method_dense_ops;    /* exact attention over all offloaded K/V */
extern const method_ops_t method_pertoken_ops; /* a compressed key per token, one run */
extern const method_ops_t method_sparq_ops;    /* SparQ: r channels at full depth */
extern const method_ops_t method_fathom_ops;   /* Fathom: planned bit planes per query */
extern const method_ops_t method_hashattn_ops; /* HashAttention: 32-bit signatures per query head */
extern const method_ops_t method_landmark_ops; /* Quest-like page min/max keys */

#endif
