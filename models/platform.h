/* platform — the rules that carry a calibration profile measured on one platform (its GPU, link
 * and host: calib_platform) to the hardware a study names.
 *
 * Each parameter belongs to a class, and each class follows one rule when the study's hardware
 * differs from the profile's platform:
 *   link      h2d_GBps, d2h_GBps, duplex_GBps follow the study's link: the box's own figures for
 *             its link (measured or published on that host) unless a link is named; else the
 *             link's measured peaks where they were measured; else raw_GBps x the protocol
 *             efficiency measured on the calibration host (its peak / its link's raw rate, per
 *             direction; the duplex total as the same share of both directions' peaks). The copy
 *             engine's latency stays as measured there, labelled assumed.
 *   sm path   gather_peak_GBps = min(the link's h2d x the SM/copy-engine ratio measured on the
 *             calibration host, the SM-side limit gather_blocks x gather_block_GBps: blocks in
 *             flight x bytes each keeps in flight / the round trip), never the rate observed on
 *             the measured link.
 *   host      row rates of SM zero-copy reads (address translation), gather_warm_rows,
 *             host_page_bytes, ce2d_page_row_ns, cebatch_piece_us (a batched copy's per-piece
 *             cost: 0.45 us on the H200's host, about 2 us on the H100 host of box h100-1): the
 *             host platform's, kept with their origin and labelled assumed on another host (box).
 *   gpu       every other fitted cost parameter (kernel efficiencies, latencies, launch costs):
 *             the profile's GPU's, applied to another GPU only labelled assumed.
 * A profile without a platform (presets, older profiles) is taken as measured on the link whose
 * preset carries measured peaks; its GPU and host are unknown, so no gpu or host rule applies. */
#ifndef ODSIM_MODELS_PLATFORM_H
#define ODSIM_MODELS_PLATFORM_H

#include "common/err.h"
#include "models/calib.h"
#include "models/hwcat.h"

typedef enum { PLATFORM_LINK, PLATFORM_SM_PATH, PLATFORM_HOST, PLATFORM_GPU, PLATFORM_OTHER } platform_class_t;

/* The class of calibration parameter `name` (PLATFORM_OTHER: a box, tier or GPU datasheet value,
 * which always comes from the study's presets). */
platform_class_t platform_class(const char *name);

/* Applies the rules to cal (a loaded profile, before calib_seed) for the resolved machine hw of
 * catalog cat: link-class and SM-path values replaced where the link differs, origins of host- and
 * gpu-class values rewritten "assumed: ..." where the host or GPU differs. Errors: ERR_NOTFOUND (the
 * link has no raw rate, or no reference link), ERR_NOMEM. */
int platform_apply(calib_t *cal, const hwcat_t *cat, const hw_t *hw, err_t *e);

#endif
