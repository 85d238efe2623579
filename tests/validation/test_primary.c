/* The primary run's choice, checked on the committed data: validation/data/h200/ is the latest
 * full run (all four suites) whose suites all started with the link within 1% of the 55.4 GB/s
 * H2D it gives when idle (validation/data/README.md). The rule is fixed before the
 * errors are seen; this keeps a later qualifying run from being left out, or a run that does not
 * qualify from being promoted. Each suite's `# ceiling_h2d_gbps:` is measured at its start; a
 * run's time is its link suite's `# date:`. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "validation/data"
#define PRIMARY "h200"
#define BAND_GBPS 54.85 /* 1% below the idle link's 55.4 GB/s */

static const char *const suites[] = {"link", "kernels", "step", "concurrency"};

/* The value of header `# key: value` of path into out (its first word); false when absent. */
static bool header_word(const char *path, const char *key, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[1024];
    size_t klen = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f) && line[0] == '#') {
        const char *p = line + 1 + strspn(line + 1, " ");
        if (strncmp(p, key, klen) || p[klen] != ':') continue;
        p += klen + 1;
        p += strspn(p, " ");
        size_t w = strcspn(p, " \r\n");
        found = w > 0 && w < n;
        if (found) {
            memcpy(out, p, w);
            out[w] = 0;
        }
    }
    fclose(f);
    return found;
}

typedef struct {
    bool full;       /* all four suites */
    bool qualifies;  /* every suite started within the band */
    char date[64];   /* its link suite's */
} run_t;

static run_t run_of(const char *name)
{
    run_t r = {true, true, ""};
    char path[512], word[64];
    for (size_t i = 0; i < sizeof suites / sizeof *suites; i++) {
        snprintf(path, sizeof path, "%s/%s/%s.csv", DATA_DIR, name, suites[i]);
        if (!header_word(path, "ceiling_h2d_gbps", word, sizeof word)) {
            r.full = r.qualifies = false;
            break;
        }
        if (!(strtod(word, NULL) >= BAND_GBPS)) r.qualifies = false;
    }
    snprintf(path, sizeof path, "%s/%s/link.csv", DATA_DIR, name);
    if (r.full && !header_word(path, "date", r.date, sizeof r.date)) r.full = r.qualifies = false;
    return r;
}

Test(primary, is_the_latest_run_whose_suites_started_at_the_link_ceiling)
{
    run_t primary = run_of(PRIMARY);
    if (!primary.full) cr_skip_test("%s/%s/ holds no full run", DATA_DIR, PRIMARY);
    cr_assert(primary.qualifies, "%s/%s/: a suite started below %.2f GB/s H2D", DATA_DIR, PRIMARY, BAND_GBPS);
    DIR *d = opendir(DATA_DIR);
    cr_assert_not_null(d);
    int others = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, PRIMARY "-", strlen(PRIMARY) + 1)) continue;
        run_t r = run_of(e->d_name);
        if (!r.full) continue;
        others++;
        cr_assert(!r.qualifies || strcmp(r.date, primary.date) < 0,
                  "%s/%s/ (%s) qualifies and is later than the primary (%s): promote it", DATA_DIR, e->d_name,
                  r.date, primary.date);
    }
    closedir(d);
    cr_assert_gt(others, 0, "no other full run under %s/ to compare with", DATA_DIR);
}
