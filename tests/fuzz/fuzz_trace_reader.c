/* libFuzzer target: the framed trace reader on arbitrary bytes. It must return an error or a valid
 * session stream, never crash, leak or allocate beyond its bounds; every session it returns must pass
 * the checks again. Each input is read twice: as given (framing, CRC and bounds checks) and with every
 * frame's CRC recomputed, so mutations also reach the protobuf decoder and the session checks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_all(const uint8_t *data, size_t size)
{
    trace_reader_t *r;
    err_t e;
    if (trace_reader_open_mem("fuzz.pb", data, size, &r, &e)) {
        if (!strstr(e.msg, "fuzz.pb")) abort(); /* every error names the file */
        return;
    }
    const trace_header_t *h = trace_reader_header(r);
    if (trace_header_check(h, &e)) abort();
    trace_session_t s;
    trace_session_init(&s);
    trace_check_state_t st;
    memset(&st, 0, sizeof st);
    int rc;
    while ((rc = trace_reader_next_session(r, &s, &e)) == 1)
        if (trace_session_check(h, &s, &st, &e)) abort();
    if (rc < 0 && !strstr(e.msg, "fuzz.pb: byte ")) abort();
    trace_session_free(&s);
    trace_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_all(data, size);
    if (size < 12 + 9) return 0;
    uint8_t *c = malloc(size);
    if (!c) return 0;
    memcpy(c, data, size);
    for (size_t at = 12; at + 9 <= size;) {
        uint32_t len = (uint32_t)c[at + 1] | (uint32_t)c[at + 2] << 8 | (uint32_t)c[at + 3] << 16 | (uint32_t)c[at + 4] << 24;
        if (len > size - at - 9) break;
        uint32_t crc = trace_crc32(c + at + 9, len);
        for (int i = 0; i < 4; i++) c[at + 5 + i] = (uint8_t)(crc >> (8 * i));
        at += 9 + (size_t)len;
    }
    read_all(c, size);
    free(c);
    return 0;
}
