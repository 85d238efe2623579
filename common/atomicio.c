#include "common/atomicio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct atomicio {
    FILE *fp;
    char *path;
    char *tmp;
};

int atomicio_open(const char *path, atomicio_t **out, err_t *e)
{
    *out = NULL;
    if (!path || !*path) return err_set(e, ERR_INVAL, "atomicio_open: empty path");
    atomicio_t *f = calloc(1, sizeof *f);
    size_t n = strlen(path) + 16;
    if (f) { f->path = strdup(path); f->tmp = malloc(n); }
    if (!f || !f->path || !f->tmp) {
        if (f) { free(f->path); free(f->tmp); free(f); }
        return err_set(e, ERR_NOMEM, "atomicio_open: out of memory");
    }
    snprintf(f->tmp, n, "%s.tmpXXXXXX", path);
    int fd = mkstemp(f->tmp);
    /* mkstemp creates 0600; outputs get the usual 0666 less the umask. */
    mode_t mask = umask(0);
    umask(mask);
    if (fd >= 0 && fchmod(fd, 0666 & ~mask) != 0) {
        close(fd);
        unlink(f->tmp);
        fd = -1;
    }
    if (fd < 0 || !(f->fp = fdopen(fd, "w"))) {
        int saved = errno;
        if (fd >= 0) { close(fd); unlink(f->tmp); }
        free(f->path); free(f->tmp); free(f);
        return err_set(e, ERR_IO, "%s: cannot create: %s", path, strerror(saved));
    }
    *out = f;
    return ERR_OK;
}

FILE *atomicio_file(atomicio_t *f) { return f->fp; }

static void atomicio_free(atomicio_t *f)
{
    free(f->path);
    free(f->tmp);
    free(f);
}

int atomicio_commit(atomicio_t *f, err_t *e)
{
    int bad = ferror(f->fp) || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0;
    int saved = errno;
    if (fclose(f->fp) != 0 && !bad) { bad = 1; saved = errno; }
    if (!bad && rename(f->tmp, f->path) != 0) { bad = 1; saved = errno; }
    int rc = ERR_OK;
    if (bad) {
        unlink(f->tmp);
        rc = err_set(e, ERR_IO, "%s: write failed: %s", f->path, strerror(saved));
    }
    atomicio_free(f);
    return rc;
}

void atomicio_abort(atomicio_t *f)
{
    if (!f) return;
    fclose(f->fp);
    unlink(f->tmp);
    atomicio_free(f);
}

int atomicio_write(const char *path, const void *buf, size_t len, err_t *e)
{
    atomicio_t *f;
    int rc = atomicio_open(path, &f, e);
    if (rc) return rc;
    if (len && fwrite(buf, 1, len, f->fp) != len) {
        atomicio_abort(f);
        return err_set(e, ERR_IO, "%s: short write", path);
    }
    return atomicio_commit(f, e);
}

int atomicio_read_all(const char *path, size_t max_bytes, char **out, size_t *len, err_t *e)
{
    *out = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return err_set(e, ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (n > max_bytes) {
            free(buf); fclose(fp);
            return err_set(e, ERR_RANGE, "%s: larger than %zu bytes", path, max_bytes);
        }
        if (got == 0) break;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf) return err_set(e, ERR_NOMEM, "%s: out of memory", path);
    if (bad) { free(buf); return err_set(e, ERR_IO, "%s: read error", path); }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return ERR_OK;
}
