/* hwinst — a resolved machine (models/hwcat.h) instantiated in an engine (sim/sim.h).
 *
 * Naming convention (resource capacities from the calibration profile, models/calib.h):
 *   per GPU g:     gpu{g}.h2d         B/s      h2d_GBps: copy-engine and SM-gather host→device bytes
 *                  gpu{g}.d2h         B/s      d2h_GBps
 *                  gpu{g}.duplex      B/s      duplex_GBps: both directions together
 *                  gpu{g}.hbm         B/s      hbm_GBps: device memory traffic of kernels and copies
 *                  gpu{g}.flops_bf16  FLOP/s   bf16_TFLOPS
 *                  gpu{g}.flops_fp8   FLOP/s   fp8_TFLOPS (absent when 0: no FP8)
 *                  gpu{g}.sm          SM       sm_count, for the executor's SM-share policies
 *                  gpu{g}.rows        share    1: the row rate of SM zero-copy gathers, shared by all of
 *                                              the GPU's gathers (each consumes 1/rows_per_s per row)
 *                  gpu{g}.ce_h2d      share    1: the host→device copy engine, serving the GPU's
 *                  gpu{g}.ce_d2h      share       copies in turns; the device→host one (each copy-
 *                                              engine op consumes its time alone per unit of work)
 *   per switch s:  switch{s}.up_h2d, switch{s}.up_d2h   B/s  the uplink shared by gpus_per_switch
 *                  GPUs (h2d_GBps, d2h_GBps of the link); only when gpus_per_switch > 1; GPU g sits
 *                  behind switch g / gpus_per_switch
 *   host:          host.dram          B/s      host_dram_GBps, shared by all GPUs
 *   tier:          cxl.read, cxl.write B/s     cxl_read_GBps, cxl_write_GBps (only with a tier)
 *   pools:         gpu{g}.hbm_mem (hbm_bytes − hbm_reserve_bytes), host.dram_mem (host_dram_bytes),
 *                  cxl.mem (cxl_bytes, only with a tier)
 *
 * A host→device transfer from host DRAM crosses host.dram, switch{s}.up_h2d (when present),
 * gpu{g}.h2d, gpu{g}.duplex and gpu{g}.hbm; from the tier, cxl.read replaces host.dram. A
 * device→host transfer crosses the same in reverse (d2h, up_d2h, host.dram or cxl.write). */
#ifndef ODSIM_MODELS_HWINST_H
#define ODSIM_MODELS_HWINST_H

#include <stdint.h>
#include "common/err.h"
#include "models/calib.h"
#include "models/hwcat.h"
#include "sim/plan.h"
#include "sim/sim.h"

/* Where host-side data lives. */
typedef enum { HWINST_DRAM = 0, HWINST_CXL = 1 } hwinst_src_t;

/* Creates every resource and pool of hw in sim, capacities from cal (seed it from hw first with
 * calib_seed). Errors: ERR_NOTFOUND (a capacity missing from cal), ERR_INVAL (a name already in
 * sim), ERR_NOMEM. */
int hwinst_build(const hw_t *hw, calib_t *cal, sim_t *sim, err_t *e);

/* The switch GPU g sits behind, or -1 when GPUs have their own root port. */
int hwinst_switch_of(const hw_t *hw, int gpu);

/* Looks up the resource called name (e.g. "gpu0.hbm"). Errors: ERR_NOTFOUND naming it. */
int hwinst_res(const sim_t *sim, const char *name, sim_res_t *out, err_t *e);

/* Fills uses[0..*n) with the constraints a host→device transfer to GPU gpu crosses, coefficient 1
 * except `duplex_coef` on gpu{g}.duplex (SM gathers consume more of it). uses must have room for
 * PLAN_MAX_USES. Errors: ERR_NOTFOUND (a resource missing: sim not built from hw), ERR_INVAL (src
 * CXL without a tier). */
int hwinst_path_h2d(const hw_t *hw, const sim_t *sim, int gpu, hwinst_src_t src, double duplex_coef,
                    plan_use_t *uses, uint8_t *n, err_t *e);
/* The same for a device→host transfer from GPU gpu. */
int hwinst_path_d2h(const hw_t *hw, const sim_t *sim, int gpu, hwinst_src_t src, plan_use_t *uses,
                    uint8_t *n, err_t *e);

#endif
