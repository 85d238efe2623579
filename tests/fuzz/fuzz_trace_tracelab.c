/* libFuzzer target: the tracelab importer (from memory) on arbitrary bytes (tests/fuzz/fuzz_import.h). */
#include "tests/fuzz/fuzz_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_import(TRACE_FMT_TRACELAB, data, size); }
