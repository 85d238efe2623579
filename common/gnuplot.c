#include "common/gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/spawn.h"

void gnuplot_quote(FILE *fp, const char *s)
{
    fputc('\'', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'') fputs("''", fp);
        else fputc(c < 0x20 || c == 0x7f ? ' ' : c, fp);
    }
    fputc('\'', fp);
}

static const char *base_of(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* The rendered temporary is whole: non-empty, ends with its format's trailer, synced to disk. */
static int check_rendered(const char *dir, const char *name, const char *tmp, int is_png, err_t *e)
{
    static const unsigned char iend[8] = {'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    int fd = open(tmp, O_RDONLY);
    struct stat st;
    char tail[32] = "";
    int ok = fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof tail;
    if (ok) ok = pread(fd, tail, sizeof tail, st.st_size - (off_t)sizeof tail) == (ssize_t)sizeof tail;
    if (ok && is_png) ok = !memcmp(tail + sizeof tail - 8, iend, 8);
    else if (ok) {
        ok = 0;
        for (size_t i = 0; i + 6 <= sizeof tail; i++) ok |= !memcmp(tail + i, "</svg>", 6);
    }
    int synced = ok && fsync(fd) == 0;
    int saved = errno;
    if (fd >= 0) close(fd);
    if (!ok) return err_set(e, ERR_IO, "%s/%s: gnuplot wrote an empty or incomplete file (disk full?)", dir, name);
    if (!synced) return err_set(e, ERR_IO, "%s/%s: cannot sync: %s", dir, name, strerror(saved));
    return ERR_OK;
}

static void write_script(FILE *fp, const char *stem, int w, int h, const char *data, const char *setup, const char *body)
{
    static const char *const ext[2] = {"svg", "png"};
    fprintf(fp, "# odsim: %s as SVG and PNG; run `gnuplot %s.gp` in this directory to redraw them.\n", stem, stem);
    for (int t = 0; t < 2; t++) {
        char name[256];
        snprintf(name, sizeof name, "%s.%s", stem, ext[t]);
        fprintf(fp, "out_%s = ARGC >= %d ? ARG%d : ", ext[t], t + 1, t + 1);
        gnuplot_quote(fp, name);
        fputc('\n', fp);
    }
    fprintf(fp, "%s\n%s\n", data, setup);
    fprintf(fp, "set terminal svg size %d,%d dynamic noenhanced\nset output out_svg\n%s\nunset output\n", w, h, body);
    fprintf(fp, "set terminal pngcairo size %d,%d noenhanced\nset output out_png\n%s\nunset output\n", w, h, body);
}

int gnuplot_render(outset_t *set, const char *stem, int width_px, int height_px, const char *data, const char *setup,
                   const char *body, err_t *e)
{
    const char *dir = outset_dir(set);
    char gp[256], svg[256], png[256];
    snprintf(gp, sizeof gp, "%s.gp", stem);
    snprintf(svg, sizeof svg, "%s.svg", stem);
    snprintf(png, sizeof png, "%s.png", stem);
    FILE *fp;
    int rc = outset_file(set, gp, &fp, e);
    if (rc) return rc;
    write_script(fp, stem, width_px, height_px, data, setup, body);
    /* gnuplot reads the temporary now; the set syncs it at commit */
    if (ferror(fp) || fflush(fp) != 0) return err_set(e, ERR_IO, "%s/%s: write failed: %s", dir, gp, strerror(errno));
    const char *svg_tmp, *png_tmp;
    if ((rc = outset_reserve(set, svg, &svg_tmp, e))) return rc;
    if ((rc = outset_reserve(set, png, &png_tmp, e))) {
        outset_drop(set, svg);
        return rc;
    }
    const char *argv[] = {"gnuplot", "-c", base_of(outset_tmp_path(set, gp)), base_of(svg_tmp), base_of(png_tmp), NULL};
    char diag[512];
    int status;
    rc = spawn_run(argv, dir, &status, diag, sizeof diag, e);
    if (rc == ERR_NOTFOUND) err_set(e, rc, "gnuplot is not installed: %s/%s written, %s and %s not drawn", dir, gp, svg, png);
    else if (!rc && status != 0)
        rc = err_set(e, ERR_IO, "gnuplot failed on %s/%s (exit status %d)%s%s", dir, gp, status, *diag ? ": " : "", diag);
    if (!rc) rc = check_rendered(dir, svg, svg_tmp, 0, e);
    if (!rc) rc = check_rendered(dir, png, png_tmp, 1, e);
    if (rc) {
        outset_drop(set, svg);
        outset_drop(set, png);
    }
    return rc;
}
