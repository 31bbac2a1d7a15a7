#!/usr/bin/env bash
# softrnic's own benchmark and perftest over the drop-in libibverbs.so.1, in one run:
# `softrnic perf` (RC WRITE 64 KiB, RC SEND 64 B ping-pong), then unmodified ib_write_bw
# (64 KiB) and ib_send_lat (64 B) between two processes on 127.0.18.1 / 127.0.18.2.
# Needs Debian's perftest. Note that ib_send_lat reports one-way latency (half a round trip).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p softrnic-tools -p softrnic-ibverbs -p softrnic-rdmacm -p softrnic-mlx5-standin -p softrnic-efa-standin
lib=$(mktemp -d)
trap 'rm -rf "$lib"' EXIT
ln -s "$PWD/target/release/libsoftrnic_ibverbs.so" "$lib/libibverbs.so.1"
ln -s "$PWD/target/release/libsoftrnic_rdmacm.so" "$lib/librdmacm.so.1"
ln -s "$PWD/target/release/libsoftrnic_mlx5.so" "$lib/libmlx5.so.1"
ln -s "$PWD/target/release/libsoftrnic_efa.so" "$lib/libefa.so.1"

./target/release/softrnic perf --secs 2 --iters 30000

pair() { # tool args...: server on .1, client on .2; prints the client's result row
  local port=$((20000 + RANDOM % 20000))
  SOFTRNIC_ADDR=127.0.18.1 LD_LIBRARY_PATH=$lib timeout 120 "$@" -x 1 -p "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  SOFTRNIC_ADDR=127.0.18.2 LD_LIBRARY_PATH=$lib timeout 120 "$@" -x 1 -p "$port" 127.0.18.1 2>&1 |
    grep -A1 -E "^ #bytes"
  wait "$server" || true
}
echo "ib_write_bw -s 65536 -n 5000 (MB/s):"
pair ib_write_bw -s 65536 -n 5000
echo "ib_send_lat -s 64 -n 5000 (usec, one-way):"
pair ib_send_lat -s 64 -n 5000
