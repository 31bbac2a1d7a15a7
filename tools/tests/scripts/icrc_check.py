#!/usr/bin/env python3
"""An ICRC check independent of softrnic's Rust code: Python's zlib CRC-32 over the fields
IBTA annex A17 (RoCEv2) says the ICRC covers, with the variant fields masked to all ones:
eight bytes standing for the LRH; the IPv4 header with Type of Service, TTL and header
checksum masked, or the IPv6 header with Traffic Class, Flow Label and Hop Limit masked; the
UDP header with its checksum masked; the BTH with its reserved byte (byte 4) masked; then the
rest of the packet up to the ICRC, which follows it as the CRC's four bytes, least
significant first.

usage: icrc_check.py FILE...   (pcap or pcapng of Ethernet frames)
Prints one line per file, `FILE: roce_ok=N roce_bad=M`, and exits 1 if any packet is bad."""
import struct
import sys
import zlib


def frames(path):
    """The frames of a pcap or pcapng file."""
    data = open(path, "rb").read()
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        at = 0
        order = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        while at + 12 <= len(data):
            kind, length = struct.unpack(order + "II", data[at:at + 8])
            if kind == 6:  # Enhanced Packet Block
                caplen = struct.unpack(order + "I", data[at + 20:at + 24])[0]
                yield data[at + 28:at + 28 + caplen]
            elif kind == 3:  # Simple Packet Block
                orig = struct.unpack(order + "I", data[at + 8:at + 12])[0]
                yield data[at + 12:at + 12 + min(orig, length - 16)]
            at += length
    else:
        order = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" or data[:4] == b"\x4d\x3c\xb2\xa1" else ">"
        at = 24
        while at + 16 <= len(data):
            caplen = struct.unpack(order + "I", data[at + 8:at + 12])[0]
            yield data[at + 16:at + 16 + caplen]
            at += 16 + caplen


def icrc_ok(frame):
    """None if `frame` is not RoCEv2; else whether its ICRC matches."""
    ethertype = frame[12:14]
    ip = frame[14:]
    if ethertype == b"\x08\x00":
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 17:
            return None
        total = struct.unpack("!H", ip[2:4])[0]
        header = bytearray(ip[:ihl])
        header[1] = 0xFF  # Type of Service
        header[8] = 0xFF  # TTL
        header[10:12] = b"\xff\xff"  # header checksum
        rest = ip[ihl:total]
    elif ethertype == b"\x86\xdd":
        if ip[6] != 17:
            return None
        total = 40 + struct.unpack("!H", ip[4:6])[0]
        header = bytearray(ip[:40])
        header[0] |= 0x0F  # Traffic Class, low nibble
        header[1] = 0xFF  # Traffic Class, high nibble, and the Flow Label
        header[2:4] = b"\xff\xff"  # Flow Label
        header[7] = 0xFF  # Hop Limit
        rest = ip[40:total]
    else:
        return None
    if len(rest) < 8 + 12 + 4 or struct.unpack("!H", rest[2:4])[0] != 4791:
        return None
    udp = bytearray(rest[:8])
    udp[6:8] = b"\xff\xff"  # checksum
    bth = bytearray(rest[8:20])
    bth[4] = 0xFF  # reserved
    covered = b"\xff" * 8 + bytes(header) + bytes(udp) + bytes(bth) + rest[20:-4]
    return struct.pack("<I", zlib.crc32(covered) & 0xFFFFFFFF) == rest[-4:]


def main():
    bad_files = 0
    for path in sys.argv[1:]:
        ok = bad = 0
        for frame in frames(path):
            verdict = icrc_ok(frame)
            if verdict is True:
                ok += 1
            elif verdict is False:
                bad += 1
        print(f"{path}: roce_ok={ok} roce_bad={bad}")
        bad_files += bad > 0 or ok == 0
    sys.exit(1 if bad_files else 0)


if __name__ == "__main__":
    main()
