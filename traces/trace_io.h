/* trace_io — the framed trace file: a streaming reader and an atomic writer.
 *
 * File layout (see traces/odsim_trace.proto): "ODSIMTRC", u32 version, then frames
 * `u8 kind | u32 length | u32 CRC-32 | payload` — one header ('H'), one frame per session ('S'), one
 * trailer ('E') with the counts; all little-endian. Every length is bounded (below) and checked against
 * the bytes left in the file before anything is allocated; the CRC is checked before decoding; every
 * decoded session is validated (trace_session_check). Errors name the file and the byte offset of the
 * frame at fault: `FILE: byte 1234: session 7 turn 2: prefill_tokens 9 > input_tokens 4`.
 *
 * Replaying a trace (the simulator):
 *
 *     trace_reader_t *r; err_t e; trace_session_t s; trace_session_init(&s);
 *     if (trace_reader_open(path, &r, &e)) fail(e.msg);
 *     const trace_header_t *h = trace_reader_header(r);    // h->open_loop, h->closed_loop, ...
 *     int rc;
 *     while ((rc = trace_reader_next_session(r, &s, &e)) == 1) {
 *         for (size_t i = 0; i < s.n_turns; i++) use(&s.turns[i]);
 *     }
 *     trace_session_free(&s); trace_reader_close(r);
 *     if (rc < 0) fail(e.msg);      // 0: the whole file was read and its trailer matched
 */
#ifndef ODSIM_TRACES_TRACE_IO_H
#define ODSIM_TRACES_TRACE_IO_H

#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "traces/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRACE_MAGIC "ODSIMTRC"
#define TRACE_MAX_HEADER_BYTES (16u << 20)   /* a header frame (it may hold a YAML config) */
#define TRACE_MAX_SESSION_BYTES (64u << 20)  /* a session frame: ~4M turns */
#define TRACE_MAX_TRAILER_BYTES 64u

typedef struct trace_reader trace_reader_t;
typedef struct trace_writer trace_writer_t;

/* Opens path, checks the magic and version and reads the header. On success *out owns the reader
 * (close with trace_reader_close). Errors: ERR_IO (cannot open), ERR_PARSE (bad magic, version,
 * truncated, corrupt or invalid header), ERR_NOMEM; messages name the file and byte offset. */
int trace_reader_open(const char *path, trace_reader_t **out, err_t *e);

/* As trace_reader_open, from len bytes at buf (not copied: buf must outlive the reader); `name`
 * stands for the file name in messages. */
int trace_reader_open_mem(const char *name, const void *buf, size_t len, trace_reader_t **out, err_t *e);

/* The header (owned by r, valid until close). */
const trace_header_t *trace_reader_header(const trace_reader_t *r);

/* Reads the next session into *s (initialised by the caller with trace_session_init; its previous
 * content is replaced and its turn buffer reused; the caller frees it with trace_session_free).
 * Returns 1 with a session, 0 at the end (the trailer was read, its counts match and nothing
 * follows it), or a negative ERR_* (ERR_PARSE for a truncated, corrupt or invalid file, ERR_IO,
 * ERR_NOMEM). After an error or the end, further calls return the same result. Memory is bounded by
 * the largest session, never by the file. */
int trace_reader_next_session(trace_reader_t *r, trace_session_t *s, err_t *e);

/* Byte offset just past the last frame read. */
uint64_t trace_reader_offset(const trace_reader_t *r);

void trace_reader_close(trace_reader_t *r);

/* Creates a temporary file beside path and writes the magic and h (checked with trace_header_check;
 * copied, h may be freed afterwards). Nothing appears at path until trace_writer_commit succeeds.
 * Errors: ERR_IO, ERR_INVAL (bad header), ERR_NOMEM. */
int trace_writer_open(const char *path, const trace_header_t *h, trace_writer_t **out, err_t *e);

/* Checks s (trace_session_check against the header and the sessions written before) and appends it.
 * Errors: ERR_INVAL (invalid session: nothing written, the writer stays usable), ERR_RANGE (the
 * encoded session exceeds TRACE_MAX_SESSION_BYTES), ERR_IO (then the writer only accepts abort). */
int trace_writer_add_session(trace_writer_t *w, const trace_session_t *s, err_t *e);

/* Writes the trailer, syncs and renames the temporary onto the path, and frees w (also on error, in
 * which case nothing appears at the path). Errors: ERR_IO. */
int trace_writer_commit(trace_writer_t *w, err_t *e);

/* Removes the temporary and frees w. w may be NULL. */
void trace_writer_abort(trace_writer_t *w);

/* Writes a whole in-memory trace atomically (open + add each session + commit). */
int trace_write_file(const char *path, const trace_t *t, err_t *e);

/* Reads a whole trace into memory (small traces and tests; replay streams with the reader). */
int trace_read_file(const char *path, trace_t *out, err_t *e);

/* CRC-32 (IEEE 802.3, as zlib's crc32) of len bytes. */
uint32_t trace_crc32(const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
