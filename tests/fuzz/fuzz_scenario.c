/* libFuzzer target: the scenario parser and the study's resolution of every sweep point (presets,
 * calibration path, method, workload) on arbitrary YAML. It must either open the study or fail with a
 * message; never crash, leak or hang. Nothing is simulated. Run from the repository root (catalogs). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cfg_doc_t *doc;
    err_t e;
    if (cfg_parse_string("fuzz.yaml", (const char *)data, size, &doc, &e)) {
        if (!e.msg[0]) abort(); /* every failure says why */
        return 0;
    }
    study_t *s;
    if (study_open_doc(doc, "fuzz.yaml", &s, &e)) {
        if (!e.msg[0]) abort();
        return 0;
    }
    for (size_t i = 0; i < study_n_points(s) && i < 4; i++)
        if (!study_point_label(s, i)) abort();
    study_free(s);
    return 0;
}
