#!/usr/bin/env python3
"""Seeds fuzz/corpus/decode/ with every frame of the kernel-rxe captures in wire/tests/data."""
import os, struct, sys

here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "wire", "tests", "data")
out = os.path.join(here, "corpus", "decode")
os.makedirs(out, exist_ok=True)
n = 0
for name in sorted(os.listdir(data)):
    if not name.endswith(".pcap"):
        continue
    b = open(os.path.join(data, name), "rb").read()
    endian = "<" if b[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    at = 24
    i = 0
    while at + 16 <= len(b):
        _, _, incl, _ = struct.unpack(endian + "IIII", b[at:at + 16])
        frame = b[at + 16:at + 16 + incl]
        at += 16 + incl
        i += 1
        with open(os.path.join(out, f"{name[:-5]}-{i:04}"), "wb") as f:
            f.write(frame)
        n += 1
print(f"{n} seeds in {out}", file=sys.stderr)
