#include "common/outset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomicio.h"

typedef struct entry {
    char *name;
    atomicio_t *f;      /* NULL once dropped */
    int finished;       /* reserved files are closed at once: another program writes them */
} entry_t;

struct outset {
    char *dir;
    entry_t *v;
    size_t n, cap;
    int no_manifest;
};

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int check_dir(const char *dir, int *exists, err_t *e)
{
    struct stat st;
    *exists = 0;
    if (!*dir) return err_set(e, ERR_INVAL, "empty output directory");
    *exists = stat(dir, &st) == 0;
    if (!*exists && errno != ENOENT) return err_set(e, ERR_IO, "%s: cannot inspect: %s", dir, strerror(errno));
    if (*exists && !S_ISDIR(st.st_mode)) return err_set(e, ERR_IO, "%s: is not a directory", dir);
    return ERR_OK;
}

/* Checks DIR/name against atomicio's rule. */
static int check_in(const char *dir, const char *name, err_t *e)
{
    char *p = join(dir, name);
    int rc = p ? atomicio_check(p, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(p);
    return rc;
}

int outset_check(const char *dir, const char *const *names, size_t n, err_t *e)
{
    int exists;
    int rc = check_dir(dir, &exists, e);
    for (size_t i = 0; !rc && exists && i <= n; i++) rc = check_in(dir, i < n ? names[i] : OUTSET_MANIFEST, e);
    return rc;
}

int outset_open(const char *dir, outset_t **out, err_t *e)
{
    *out = NULL;
    int exists;
    int rc = check_dir(dir, &exists, e);
    if (rc) return rc;
    if (!exists && mkdir(dir, 0777) != 0 && errno != EEXIST) return err_set(e, ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
    outset_t *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    *out = s;
    return ERR_OK;
}

void outset_no_manifest(outset_t *s) { s->no_manifest = 1; }

const char *outset_dir(const outset_t *s) { return s->dir; }

static int add(outset_t *s, const char *name, atomicio_t **f, err_t *e)
{
    *f = NULL;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        entry_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return err_set(e, ERR_NOMEM, "out of memory");
        s->v = v;
        s->cap = cap;
    }
    char *p = join(s->dir, name);
    char *nm = strdup(name);
    int rc = (p && nm) ? atomicio_open(p, f, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(p);
    if (rc) {
        free(nm);
        return rc;
    }
    s->v[s->n++] = (entry_t){nm, *f, 0};
    return ERR_OK;
}

int outset_file(outset_t *s, const char *name, FILE **fp, err_t *e)
{
    atomicio_t *f;
    int rc = add(s, name, &f, e);
    *fp = rc ? NULL : atomicio_file(f);
    return rc;
}

const char *outset_tmp_path(const outset_t *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].f && !strcmp(s->v[i].name, name)) return atomicio_tmp_path(s->v[i].f);
    return NULL;
}

int outset_reserve(outset_t *s, const char *name, const char **tmp_path, err_t *e)
{
    atomicio_t *f;
    int rc = add(s, name, &f, e);
    if (rc) return rc;
    if ((rc = atomicio_finish(f, e))) {   /* it freed f: forget the entry */
        s->n--;
        free(s->v[s->n].name);
        return rc;
    }
    s->v[s->n - 1].finished = 1;
    *tmp_path = atomicio_tmp_path(f);
    return ERR_OK;
}

void outset_drop(outset_t *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].f && !strcmp(s->v[i].name, name)) {
            atomicio_abort(s->v[i].f);
            s->v[i].f = NULL;
        }
}

static void free_set(outset_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        atomicio_abort(s->v[i].f);
        free(s->v[i].name);
    }
    free(s->v);
    free(s->dir);
    free(s);
}

void outset_abort(outset_t *s)
{
    if (s) free_set(s);
}

/* Removes DIR/name when it is a file the rule lets us replace (ENOENT is fine). */
static int remove_in(const char *dir, const char *name, err_t *e)
{
    char *p = join(dir, name);
    int rc = p ? atomicio_check(p, e) : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc && unlink(p) != 0 && errno != ENOENT) rc = err_set(e, ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
    free(p);
    return rc;
}

int outset_commit(outset_t *s, err_t *e)
{
    int rc = ERR_OK;
    for (size_t i = 0; !rc && i < s->n; i++) {
        entry_t *x = &s->v[i];
        if (x->f && !x->finished && (rc = atomicio_finish(x->f, e))) x->f = NULL;   /* finish freed it */
        x->finished = 1;
    }
    char *list = NULL;
    size_t len = 0;
    FILE *m = rc ? NULL : open_memstream(&list, &len);
    if (!rc && !m) rc = err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) {
        fputs("# odsim output set: the files below were written together by one run, and are complete.\n"
              "# A file of this directory not listed here is from another run. name, bytes:\n", m);
        if (!s->no_manifest) rc = remove_in(s->dir, OUTSET_MANIFEST, e);
    }
    for (size_t i = 0; !rc && i < s->n; i++) {
        entry_t *x = &s->v[i];
        if (!x->f) {
            rc = remove_in(s->dir, x->name, e);
            continue;
        }
        struct stat st;
        off_t bytes = stat(atomicio_tmp_path(x->f), &st) == 0 ? st.st_size : -1;
        rc = atomicio_publish(x->f, e);
        x->f = NULL;
        if (!rc) fprintf(m, "%s %lld\n", x->name, (long long)bytes);
    }
    if (m) fclose(m);
    char *path = join(s->dir, OUTSET_MANIFEST);
    if (!rc && !s->no_manifest) rc = path && list ? atomicio_write(path, list, len, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(path);
    free(list);
    free_set(s);
    return rc;
}
