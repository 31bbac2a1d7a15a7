#!/usr/bin/env python3
"""Seeds fuzz/corpus/decode/ with every frame of the kernel-rxe captures in wire/tests/data,
and fuzz/corpus/rc_qp/ with hand-made conversations with the rc_qp target's QP."""
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

# rc_qp: hand-made conversations in the target's conventions (fuzz_targets/rc_qp.rs): parts
# cut at MARK, PSNs relative to the cursor (0: next), small R_Keys naming the target's regions
# (0 W, 1 R, 2 A, 3 L, 4 O, 5 type 2 window, 6 type 1 window) with VAs as offsets.
MARK = b"\xff\xff\x5a\xa5"
ICRC = b"\0\0\0\0"


def bth(op, psn=0, ackreq=False):
    return bytes([op, 0, 0xff, 0xff, 0x80 if ackreq else 0, 0, 0, 0]) + psn.to_bytes(4, "big")


def reth(key, off, length):
    return off.to_bytes(8, "big") + key.to_bytes(4, "big") + length.to_bytes(4, "big")


def atomic(key, off, a, b=0):
    return off.to_bytes(8, "big") + key.to_bytes(4, "big") + a.to_bytes(8, "big") + b.to_bytes(8, "big")


def aeth(syndrome, msn):
    return bytes([syndrome]) + msn.to_bytes(3, "big")


def pkt(*fields):
    return b"".join(fields) + ICRC


def payload(n, seed=1):
    return bytes((i * 7 + seed) & 0xff for i in range(n))


seeds = {
    "send": [pkt(bth(0x04, ackreq=True), payload(64))],
    "send-imm-multi": [pkt(bth(0x00), payload(256)), pkt(bth(0x03, ackreq=True), b"\1\2\3\4", payload(100))],
    "send-inv": [pkt(bth(0x17, ackreq=True), (5).to_bytes(4, "big"), payload(32)),
                 pkt(bth(0x0a, ackreq=True), reth(5, 0, 16), payload(16))],
    "write": [pkt(bth(0x0a, ackreq=True), reth(0, 0x10, 32), payload(32))],
    "write-multi-mw": [pkt(bth(0x06), reth(5, 0, 600), payload(256)), pkt(bth(0x07), payload(256)),
                       pkt(bth(0x09, ackreq=True), b"\0\0\0\7", payload(88))],
    "write-imm-denied": [pkt(bth(0x0b, ackreq=True), reth(1, 0, 8), b"\0\0\0\1", payload(8))],
    "read": [pkt(bth(0x0c), reth(1, 0x100, 512))],
    "read-dup": [pkt(bth(0x0c), reth(0, 0, 700)), pkt(bth(0x0c, 0xfffffd), reth(0, 256, 444))],
    "fetch-add": [pkt(bth(0x14), atomic(2, 4, 5))],
    "cmp-swap-mw": [pkt(bth(0x13), atomic(6, 4, 0, 9)), pkt(bth(0x13, 0xffffff), atomic(6, 4, 0, 9))],
    "atomic-write": [pkt(bth(0x1d), reth(0, 8, 8), payload(8))],
    "flush": [pkt(bth(0x1c), b"\0\0\0\1", reth(0, 0, 64))],
    "rnr-then-timer": [pkt(bth(0x04), payload(4))] * 9 + [b"\x14"],
    "requester": [b"", pkt(bth(0x11), aeth(0, 1)), pkt(bth(0x0d), aeth(0, 1), payload(256)),
                  pkt(bth(0x0f), aeth(0, 2), payload(256)), pkt(bth(0x12), aeth(0, 3), (7).to_bytes(8, "big")),
                  pkt(bth(0x11, 1), aeth(0, 4))],
    "requester-nak": [pkt(bth(0x11), aeth(0x60, 0)), pkt(bth(0x11, 0xffffff), aeth(0x20, 0)), b"\x16"],
    "requester-timeout": [b"\x17", b"\x17", pkt(bth(0x10), aeth(0, 1), payload(512))],
}
out = os.path.join(here, "corpus", "rc_qp")
os.makedirs(out, exist_ok=True)
for name, parts in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(MARK.join(parts))
print(f"{len(seeds)} seeds in {out}", file=sys.stderr)
