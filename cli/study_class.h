/* study_class — session classes within a replication (private to cli/study*.c): which class each
 * session joins, the class's method and session shapes, and the counts its figures need.
 *
 * Assignment: session (closed population: user) i joins the class furthest below its share, the
 * largest share_c x (i + 1) - n_c where n_c counts the earlier indices in class c; ties go to the class
 * listed first. After any n indices each of two classes holds share x n rounded to the nearest (a half
 * to the first), and with shares that are multiples of 1/n every class holds exactly share x n.
 * Indices are the ones the study places sessions by: a trace's or an open generator's session order, a
 * closed population's user. */
#ifndef ODSIM_CLI_STUDY_CLASS_H
#define ODSIM_CLI_STUDY_CLASS_H

#include <stdint.h>
#include "common/err.h"
#include "traces/trace.h"

typedef struct study_point study_point_t;
typedef struct method method_t;
typedef struct exec exec_t;
typedef struct study_classes study_classes_t;

/* The classes of point pt's replication k (pt->n_classes > 0): the method of each class that has
 * its own (built from the plans seed plans_seed, as the scenario's), a generator per class with
 * generator overrides (seeded from replication k's class streams). `shared` is the scenario's
 * method, borrowed. Errors: those of method_new and tracegen_new (naming file, line and key), ERR_NOMEM. */
int study_classes_new(const study_point_t *pt, uint32_t k, int64_t plans_seed, const method_t *shared,
                      study_classes_t **out, err_t *e);
void study_classes_free(study_classes_t *c);

/* The class of index i (the rule above). Errors: ERR_NOMEM. */
int study_classes_of(study_classes_t *c, uint64_t i, uint32_t *cls, err_t *e);
/* The method of class cls's sessions (the scenario's when the class has none of its own). */
const method_t *study_classes_method(const study_classes_t *c, uint32_t cls);
/* Counts a session added to class cls; the sessions counted so far. */
void study_classes_count(study_classes_t *c, uint32_t cls);
uint64_t study_classes_sessions(const study_classes_t *c, uint32_t cls);

/* A generator session ts at index i, drawn by the scenario's generator: when i's class has generator
 * overrides, its content is replaced by the class generator's next session, keeping ts's place in
 * time (id, arrival, user, gap before it). Errors: those of tracegen_next_session, ERR_NOMEM. */
int study_classes_reshape(study_classes_t *c, uint64_t i, trace_session_t *ts, err_t *e);

/* Marks the warm-up's end: each class's decode tokens so far, which its throughput leaves out. */
void study_classes_warmup(study_classes_t *c, exec_t *x);
uint64_t study_classes_tokens_at_warmup(const study_classes_t *c, uint32_t cls);

/* Checks every class's own method and generator of pt (opening a study): each built once. Errors as
 * study_classes_new. */
int study_classes_check(const study_point_t *pt, err_t *e);

#endif
