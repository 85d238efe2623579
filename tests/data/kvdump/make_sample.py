#!/usr/bin/env python3
"""Writes the small synthetic key/query dump in this directory (odsim quality --keys tests/data/kvdump).

Standard library only (no NumPy): the .npy files are written by hand, version 1.0. Two layers of one
KV head, n = 64 tokens, d = 16, G = 2 query heads; layer 0: float16 keys, float32 queries of 3 steps
(shape (3, 2, 16)) and float32 values; layer 1: float32 keys, float16 queries of one step (shape
(2, 16)), no values. Keys have per-channel scales (two outlier channels); queries are random.
Deterministic: python3 make_sample.py rewrites the same bytes.
"""
import os
import random
import struct


def write_npy(path, shape, descr, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    fmt = "<%d%s" % (len(values), "e" if descr == "<f2" else "f")
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("ascii"))
        f.write(struct.pack(fmt, *values))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(35)
    n, d, g = 64, 16, 2
    scale = [4.0 if j in (3, 11) else 0.5 + rng.random() for j in range(d)]
    for layer, (kd, qshape, qd, with_v) in enumerate([("<f2", (3, g, d), "<f4", True),
                                                      ("<f4", (g, d), "<f2", False)]):
        keys = [rng.gauss(0, 1) * scale[i % d] for i in range(n * d)]
        count = 1
        for s in qshape:
            count *= s
        queries = [rng.gauss(0, 1) for _ in range(count)]
        base = os.path.join(here, "layer%d_kv0_" % layer)
        write_npy(base + "keys.npy", (n, d), kd, keys)
        write_npy(base + "queries.npy", qshape, qd, queries)
        if with_v:
            write_npy(base + "values.npy", (n, d), "<f4", [rng.gauss(0, 1) for _ in range(n * d)])


if __name__ == "__main__":
    main()
