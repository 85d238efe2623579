#include "validation/probe.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/method_ops.h"
#include "models/opkind.h"
#include "sim/exec.h"

static void put_q(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(fp, "\\%c", *p);
        else if (*p < 0x20) fprintf(fp, "\\x%02x", *p);
        else fputc(*p, fp);
    }
    fputc('"', fp);
}

static void put_num(FILE *fp, const char *key, double v)
{
    if (!isnan(v)) fprintf(fp, ", %s: %.17g", key, v);
}

static void put_str(FILE *fp, const char *key, const char *v)
{
    if (!v || !*v) return;
    fprintf(fp, ", %s: ", key);
    put_q(fp, v);
}

static bool one_of(const char *s, const char *const *names)
{
    for (; *names; names++)
        if (!strcmp(s, *names)) return true;
    return false;
}

/* Whether kbench's timed window opens after the host has launched the row's work: kbench times a
 * kernel with CUDA events, and an idle GPU records the first event before the launch arrives. Its
 * device-resident kernels run after an L2 flush that keeps the GPU busy meanwhile; a step's stages
 * run behind the stage before, except the step's first (Fathom's and SparQ's planner, a host index's
 * copy, else the scan; dense attention) unless its repetitions start with the GPU busy
 * (`busy_start`: then every stage's launch is hidden, and the whole step's first). */
static bool launch_hidden(const kbrow_t *r, const method_ops_t *ops, bool busy_start)
{
    if (busy_start && !strcmp(r->suite, "step")) return true;
    bool transfer = r->op == OPKIND_INDEX_FETCH || r->op == OPKIND_WINNER_FETCH || r->op == OPKIND_H2D_COPY ||
                    r->op == OPKIND_D2H_COPY || r->op == OPKIND_H2D_COPY2D || r->op == OPKIND_H2D_BATCH ||
                    r->op == OPKIND_SM_GATHER || r->op == OPKIND_FLUSH;
    /* the winner fetch with its K/V in HBM is a device kernel, timed after an L2 flush */
    if (!strcmp(r->suite, "kernels"))
        return (!transfer || r->op == OPKIND_WINNER_FETCH) && !strncmp(r->placement, "hbm", 3);
    if (strcmp(r->suite, "step") || r->op == OPKIND_LAYER_STEP) return false;
    int first = ops->query_dependent             ? OPKIND_WF_PLAN
                : ops->reads_all                 ? OPKIND_ATTN_DENSE
                : !strcmp(r->placement, "host") ? OPKIND_INDEX_FETCH
                                                 : OPKIND_SCAN;
    return r->op != first;
}

static bool reads_all(const method_ops_t *ops) { return ops->reads_all; }
static bool planner(const method_ops_t *ops) { return ops->planner; }
static bool pages(const method_ops_t *ops) { return ops->pages; }

/* The first method whose table has `trait`: the method a row stands for when it names none. */
static int method_with(bool (*trait)(const method_ops_t *))
{
    int kind = 0;
    while (kind < method_count() && !trait(method_ops_at(kind))) kind++;
    return kind;
}

int probe_scenario(const kbrow_t *r, const char *box, const char *calib_path, bool busy_start, const char *key_sigma2,
                   char **out, err_t *e)
{
    static const char *const layouts[] = {"split", "interleaved", "token", "page", NULL};
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp) return err_set(e, ERR_NOMEM, "probe: out of memory");
    const char *base = strrchr(r->file, '/');
    char name[512];
    snprintf(name, sizeof name, "validate %s:%d", base ? base + 1 : r->file, r->line);
    fputs("name: ", fp);
    put_q(fp, name);
    fputs("\nhardware: {box: ", fp);
    put_q(fp, box);
    fputs("}\ncalibration: ", fp);
    put_q(fp, calib_path);
    fputs("\nmodel: {name: ", fp);
    put_q(fp, *r->model ? r->model : "qwen3-8b");
    fputs("}\n", fp);
    /* The method: the row's, else its variant when that names one (scan rows), else the one reading
     * all K/V (dense) for dense attention, else the planned one (Fathom: an op's form is the same in
     * every sparse method). kbench's winner-fetch layouts map to the method's: apart → split, token →
     * token with shared selection, pageP → pages of P tokens (landmark). */
    const char *method = *r->method ? r->method : r->variant;
    char mname[64];
    size_t ml = strcspn(method, "0123456789");
    snprintf(mname, sizeof mname, "%.*s", (int)(ml < sizeof mname ? ml : sizeof mname - 1), method);
    const char *page = method + ml;
    int kind = method_find(mname);
    if (kind < 0) {
        kind = method_with(r->op == OPKIND_ATTN_DENSE ? reads_all : planner);
        page = "";
    }
    char lay[32];
    snprintf(lay, sizeof lay, "%.*s", (int)strcspn(r->layout, ";"), r->layout);
    const char *select = NULL;
    if (!strcmp(lay, "apart")) snprintf(lay, sizeof lay, "split");
    if (!strcmp(lay, "token")) select = "shared";
    if (!strncmp(lay, "page", 4) && lay[4] >= '0' && lay[4] <= '9') {
        kind = method_with(pages);
        page = r->layout + 4;
        snprintf(lay, sizeof lay, "page");
    }
    const method_ops_t *ops = method_ops_at(kind);
    fputs("method: {method: ", fp);
    put_q(fp, ops->name);
    /* kbench plans Fathom over its own synthetic keys, whose variances its CSV header gives, at a
     * fixed plane budget: its wf_plan rows name that budget, its other rows label it with the scales
     * it brings, 8 bits more (kernels/kbench/step.cu: FATHOM_PLANE_BITS + 8) */
    if (ops->planner && r->bits > (r->op == OPKIND_WF_PLAN ? 0 : 8)) {
        put_num(fp, "plane_bits", r->op == OPKIND_WF_PLAN ? r->bits : r->bits - 8);
        if (!key_sigma2 || !*key_sigma2) {
            fclose(fp);
            free(buf);
            return err_set(e, ERR_INVAL, "%s:%d: a planned Fathom row, and the file's header gives no key_sigma2 line", r->file,
                           r->line);
        }
        fputs(", key_variances: [", fp);
        const char *p = key_sigma2;
        for (int n = 0;; n++) {
            p += strspn(p, " \t");
            size_t w = strcspn(p, " \t");
            if (!w) break;
            fprintf(fp, "%s%.*s", n ? ", " : "", (int)w, p);
            p += w;
        }
        fputc(']', fp);
    } else if (r->bits > 0 && !ops->budget_fixed)
        put_num(fp, "budget", r->bits);
    /* a prefill chunk: exact or sparse by kbench's variant; a sparse chunk's k column holds the rows it
     * selects per KV head, prefill_union x k (kbench's union is 8, odsim's default: its CSV header);
     * kbench's other cases without a k ran at its k = 2048 */
    bool pf = r->op == OPKIND_PREFILL_CHUNK;
    if (pf) put_str(fp, "prefill", !strcmp(r->variant, "sparse") ? "sparse" : "exact");
    if (!ops->reads_all) put_num(fp, "k", r->k > 0 ? (pf ? r->k / 8 : r->k) : 2048);
    if (ops->pages && *page) fprintf(fp, ", page: %d", atoi(page));
    if (one_of(lay, layouts)) put_str(fp, "layout", lay);
    /* kbench's other numbered plane-scan kernels ("...;kernelN") and its Fathom scan of each query
     * head apart (a kernels-suite scan row of several query heads; in steps qheads is the group) */
    const char *kn = strstr(r->layout, ";kernel");
    static const char *const plane_scans[] = {NULL, "token_per_thread", "two_per_thread"};
    int kv = kn ? atoi(kn + 7) : 0;
    if (kv >= 1 && kv <= 2 && ops->scan_forms) put_str(fp, "plane_scan", plane_scans[kv]);
    bool kernels_scan = r->op == OPKIND_SCAN && !strcmp(r->suite, "kernels");
    if (kernels_scan && ops->scan_forms && r->qheads > 1) select = "query_head";
    /* kbench selects as the method's kernels do (HashAttention per query head, the others per KV head) */
    if (!select && !ops->reads_all) select = ops->select == SELECT_QUERY_HEAD ? "query_head" : "kv_head";
    if (select) put_str(fp, "select", select);
    /* kbench fetches each query head's HashAttention winners without removing duplicates: the union
     * of a KV head's G sets is G·k rows (kernels/NOTES.md) */
    if (ops->select == SELECT_QUERY_HEAD && r->qheads > 1) put_num(fp, "union", r->qheads);
    /* kbench's step keeps a dense HBM tail ("...;tail=N"): the method's window */
    const char *tail = strstr(r->layout, "tail=");
    if (tail && atoi(tail + 5) > 0) fprintf(fp, ", window: %d", atoi(tail + 5));
    bool index_place = !strcmp(r->placement, "host") || !strncmp(r->placement, "hbm", 3) ||
                       !strncmp(r->placement, "layers:", 7) || !strncmp(r->placement, "planes:", 7);
    if (index_place && !ops->reads_all)   /* dense keeps no index: its K/V placement is the probe's */
        put_str(fp, "placement", strncmp(r->placement, "hbm", 3) ? r->placement : "hbm");
    /* kbench's hbm_all keeps K/V whole in HBM as well as the index, and so does its kernels suite's
     * winner fetch from HBM. */
    bool kernels_win_hbm = r->op == OPKIND_WINNER_FETCH && !strcmp(r->suite, "kernels") && !strcmp(r->placement, "hbm");
    if (!strcmp(r->placement, "hbm_all") || kernels_win_hbm)
        fputs(", kv_placement: hbm", fp);
    /* kbench stores Fathom's and SparQ's planes channel-major within each chunk of T tokens, and
     * fetches them with its SM prefix kernel unless a row names the copy engine (the concurrency
     * suite's header says SM; the kernels suite names the path in its variant, sm or ce2d) */
    bool planes = ops->query_dependent;
    bool fetch_row = r->op == OPKIND_INDEX_FETCH && !strcmp(r->suite, "kernels");
    if (planes) fputs(", index_layout: chunked", fp);
    bool ce = strstr(r->policy, "fetch:ce") || (fetch_row && !strcmp(r->variant, "ce2d"));
    if (ce) fputs(", index_fetch: ce", fp);
    else if (strstr(r->policy, "fetch:sm") || planes || (fetch_row && !strcmp(r->variant, "sm")))
        fputs(", index_fetch: sm", fp);
    fputs("}\n", fp);
    /* kbench's concurrency policies: "procs:N" (separate processes), "streams:N" (its whole suite's
     * "streams:N;fetch:PATH" too). */
    char mode[32];
    snprintf(mode, sizeof mode, "%.*s", (int)strcspn(r->policy, ":;"), r->policy);
    if (!strcmp(mode, "procs")) snprintf(mode, sizeof mode, "processes");
    /* kbench runs each session on one CUDA stream and times it with events recorded in that stream. */
    fputs("serving: {session_streams: one, latency_from: device", fp);
    if (pf && r->batch > 0) put_num(fp, "prefill_chunk", r->batch);
    if (one_of(mode, exec_mode_names)) fprintf(fp, ", mode: %s", mode);
    fputs("}\n", fp);
    const char *what = r->op == OPKIND_LAYER_STEP     ? "layer_step"
                       : r->op == OPKIND_SESSION_STEP ? "session_step"
                       : pf                           ? "prefill_chunk"
                                                      : "op";
    fprintf(fp, "workload:\n  kind: probe\n  probe: {what: %s", what);
    put_str(fp, "op", r->op_name);
    put_str(fp, "variant", r->variant);
    put_num(fp, "n_tokens", r->n_tokens);
    put_num(fp, "heads", r->heads);
    put_num(fp, "bits", r->bits);
    put_num(fp, "k", r->k);
    put_num(fp, "batch", r->batch > 0 ? r->batch : NAN);
    put_num(fp, "piece_bytes", r->piece_bytes);
    put_num(fp, "region_bytes", r->region_bytes);
    if (r->op == OPKIND_QUANTIZE) put_num(fp, "bytes", r->bytes_moved);   /* no plan quantises a whole context */
    put_num(fp, "pieces", r->pieces);
    put_num(fp, "blocks", r->blocks);
    put_str(fp, "placement", r->placement);
    put_str(fp, "layout", r->layout);
    /* The kernels suite runs a scan or dense attention with its data on the host straight from
     * pinned host memory, and so does the step suite's dense attention (whose tail stage then finds
     * the partials in L2); a step's scan reads an index fetched first. */
    bool step = !strcmp(r->suite, "step");
    bool zc_op = r->op == OPKIND_SCAN || r->op == OPKIND_ATTN_DENSE;
    bool zc_step = step && (r->op == OPKIND_ATTN_DENSE || (r->op == OPKIND_ATTN_TAIL && ops->reads_all));
    if (((!strcmp(r->suite, "kernels") && zc_op) || zc_step) && !strcmp(r->placement, "host"))
        fputs(", zero_copy: true", fp);
    if (!strcmp(r->suite, "step") && r->op != OPKIND_LAYER_STEP) fputs(", stage: true", fp);
    if (launch_hidden(r, ops, busy_start)) fputs(", launch_hidden: true", fp);
    double sessions = fmax(isnan(r->procs) ? 1 : r->procs, isnan(r->streams) ? 1 : r->streams);
    put_num(fp, "sessions", sessions >= 1 ? sessions : 1);
    /* as many steps as kbench's repetitions (a p99 is an order statistic of them), up to the 1000 of its
     * step suite */
    double steps = isnan(r->reps) ? 20 : fmin(fmax(r->reps, 20), 1000);
    if (pf) steps = 1000;   /* the neighbours decode for as long as the chunk runs (kbench loops them) */
    put_num(fp, "steps", steps);
    put_num(fp, "streams", r->streams >= 1 ? r->streams : NAN);
    fputs("}\nrun: {replications: 1, seed: 1, sample_calibration: false, jitter: true}\n", fp);
    if (fclose(fp) || !buf) {
        free(buf);
        return err_set(e, ERR_NOMEM, "probe: out of memory");
    }
    *out = buf;
    return ERR_OK;
}
