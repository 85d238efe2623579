/* Tests of kernels/replay_fmt.c (docs/replay.md): a small workload read, written and read back, and
 * broken inputs each refused with a message naming the file and line. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/replay_fmt.h"

/* Lines 1-6: the header and a session's region; each case's own lines start at line 7. */
#define HEAD "odsim-replay 1\nworkload t\nmode streams\nwindow_ms 100\nsession\nregion 1048576\n"

static rf_workload_t *alloc_w(void)
{
    rf_workload_t *w = malloc(sizeof *w);
    cr_assert(w);
    return w;
}

/* Parses text (named t.replay) and expects a failure whose message starts with prefix and holds what. */
static void refused(const char *text, const char *prefix, const char *what)
{
    rf_workload_t *w = alloc_w();
    char err[512] = "";
    cr_assert_eq(rf_parse(text, strlen(text), "t.replay", w, err, sizeof err), -1, "accepted:\n%s", text);
    cr_assert(!strncmp(err, prefix, strlen(prefix)), "message '%s' does not start with '%s'", err, prefix);
    cr_assert(strstr(err, what), "message '%s' does not say '%s'", err, what);
    free(w);
}

/* w written by rf_write, parsed back into back and equal to w; returns the text (free it). */
static char *written_and_read_back(const rf_workload_t *w, rf_workload_t *back)
{
    char *buf = NULL, err[512] = "";
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert(f);
    cr_assert_eq(rf_write(f, w), 0);
    fclose(f);
    cr_assert_eq(rf_parse(buf, n, "mem", back, err, sizeof err), 0, "%s\n%s", err, buf);
    cr_assert(rf_equal(w, back), "%s", buf);
    return buf;
}

Test(replay_fmt, reads_writes_and_reads_back)
{
    const char *text = HEAD "idle_us 250\n"
                            "op 0 h2d pieces=4 piece_bytes=4096 span=65536   # a comment\n"
                            "op 1 gather stream=1 after=0 pieces=2 piece_bytes=256 span=4096\n"
                            "op 2 sync\n"
                            "op 3 host us=7\n"
                            "end\n\n# trailing comment\n";
    rf_workload_t *w = alloc_w(), *back = alloc_w();
    char err[512] = "";
    cr_assert_eq(rf_parse(text, strlen(text), "t.replay", w, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(w->name, "t");
    cr_assert_eq(w->mode, RF_MODE_STREAMS);
    cr_assert_eq(w->min_steps, 10);    /* defaults */
    cr_assert_eq(w->warmup_steps, 3);
    cr_assert_eq(w->seed, 1);
    cr_assert_eq(w->n_sessions, 1);
    const rf_session_t *s = &w->sessions[0];
    cr_assert_eq(s->idle_us, 250);
    cr_assert_eq(s->n_ops, 4);
    cr_assert_eq(s->ops[1].kind, RF_OP_GATHER);
    cr_assert_eq(s->ops[1].stream, 1);
    cr_assert_eq(s->ops[1].n_after, 1);
    cr_assert_eq(s->ops[1].after[0], 0);
    cr_assert_eq(rf_pitch(&s->ops[0]), 16384);
    for (uint64_t i = 0; i < 64; i++) {
        uint64_t off = rf_piece_offset(w->seed, 0, 0, i, 65536, 4096);
        cr_assert(off % 4096 == 0 && off + 4096 <= 65536, "piece %llu at %llu", (unsigned long long)i,
                  (unsigned long long)off);
    }

    char *buf = written_and_read_back(w, back);
    back->sessions[0].ops[3].us = 8;
    cr_assert(!rf_equal(w, back));
    free(buf);
    free(w);
    free(back);
}

Test(replay_fmt, numbers_up_to_2_pow_53)
{
    const char *ok = "odsim-replay 1\nworkload t\nmode procs\nwindow_ms 100\nseed 9007199254740992\n"
                     "session\nregion 4096\nop 0 spin us=1\nend\n";
    rf_workload_t *w = alloc_w();
    char err[512] = "";
    cr_assert_eq(rf_parse(ok, strlen(ok), "t.replay", w, err, sizeof err), 0, "%s", err);
    cr_assert_eq(w->seed, 9007199254740992ull);
    free(w);
    refused("odsim-replay 1\nworkload t\nmode procs\nwindow_ms 100\nseed 9007199254740993\n", "t.replay:5:", "2^53");
}

Test(replay_fmt, gemm_read_written_and_bounded)
{
    const char *text = HEAD "op 0 gemm m=1 n=65536 k=4096\nop 1 gemm stream=3 after=0 k=1 n=1 m=65536\nend\n";
    rf_workload_t *w = alloc_w(), *back = alloc_w();
    char err[512] = "";
    cr_assert_eq(rf_parse(text, strlen(text), "t.replay", w, err, sizeof err), 0, "%s", err);
    const rf_op_t *o = &w->sessions[0].ops[1];
    cr_assert_eq(o->kind, RF_OP_GEMM);
    cr_assert(o->m == 65536 && o->n == 1 && o->k == 1 && o->stream == 3 && o->n_after == 1);
    cr_assert(!rf_kind_is_transfer(RF_OP_GEMM));
    char *buf = written_and_read_back(w, back);
    cr_assert(strstr(buf, "op 1 gemm stream=3 after=0 m=65536 n=1 k=1\n"), "%s", buf);
    back->sessions[0].ops[0].k = 4095;
    cr_assert(!rf_equal(w, back));
    free(buf);
    free(w);
    free(back);
    refused(HEAD "op 0 gemm m=0 n=1 k=1\nend\n", "t.replay:7:", "out of range");
    refused(HEAD "op 0 gemm m=1 n=65537 k=1\nend\n", "t.replay:7:", "out of range");
    refused(HEAD "op 0 gemm m=1 n=1\nend\n", "t.replay:7:", "'k' missing");
    refused(HEAD "op 0 gemm m=1 n=1 k=1 bytes=4\nend\n", "t.replay:7:", "bytes");
    refused(HEAD "op 0 hbm bytes=4 m=1\nend\n", "t.replay:7:", "'m'");
}

Test(replay_fmt, refuses_broken_inputs_naming_file_and_line)
{
    refused(HEAD "op 0 h2d pieces=4 piece_bytes=4096 span=65536 colour=red\nend\n", "t.replay:7:", "colour");
    refused(HEAD "bogus 1\nend\n", "t.replay:7:", "bogus");
    refused(HEAD "op 1 hbm bytes=10\nend\n", "t.replay:7:", "expected 0");
    refused(HEAD "op 0 hbm bytes=10\nop 2 hbm bytes=10\nend\n", "t.replay:8:", "expected 1");
    refused(HEAD "op 0 hbm bytes=10 after=1\nend\n", "t.replay:7:", "after");
    refused(HEAD "op 0 hbm bytes=10\nop 1 hbm bytes=10 after=1\nend\n", "t.replay:8:", "after");
    refused(HEAD "op 0 h2d pieces=1 piece_bytes=4096 span=2097152\nend\n", "t.replay:7:", "region");
    refused(HEAD "op 0 h2d pieces=5 piece_bytes=4096 span=16384\nend\n", "t.replay:7:", "span");
    refused(HEAD "op 0 h2d pieces=1 piece_bytes=3000 span=4096\nend\n", "t.replay:7:", "power of two");
    refused(HEAD "op 0 hbm bytes=10\n", "t.replay:", "end");
    refused(HEAD "op 0 hbm bytes=10\nend\nop 1 hbm bytes=10\n", "t.replay:9:", "after end");
    refused(HEAD "op 0 hbm bytes=+10\nend\n", "t.replay:7:", "+10");
    refused(HEAD "op 0 hbm bytes=-10\nend\n", "t.replay:7:", "-10");
    refused(HEAD "op 0 hbm bytes=1e3\nend\n", "t.replay:7:", "1e3");
    refused(HEAD "op 0 hbm bytes=9007199254740993\nend\n", "t.replay:7:", "2^53");
    refused(HEAD "op 0 sync stream=1\nend\n", "t.replay:7:", "stream");
    refused(HEAD "op 0 hbm\nend\n", "t.replay:7:", "bytes");
    refused("odsim-replay 1\nworkload t\nmode procs\nsession\nregion 4096\nop 0 spin us=1\nend\n", "t.replay:4:",
            "window_ms");
    refused("odsim-replay 2\n", "t.replay:1:", "version");
    refused("workload t\n", "t.replay:1:", "odsim-replay");
    refused("", "t.replay", "empty");
    refused(HEAD "region 4096\nop 0 spin us=1\nend\n", "t.replay:7:", "twice");
    refused("odsim-replay 1\nworkload t\nmode procs\nwindow_ms 100\nsession\nregion 68719476736\nop 0 spin us=1\n"
            "session\nregion 68719476736\n",
            "t.replay:9:", "100 GiB");
}
