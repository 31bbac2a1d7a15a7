#!/usr/bin/env bash
# softrnic against the Linux kernel's Soft-RoCE (rdma_rxe): unmodified rdma-core and perftest
# programs, softrnic's drop-in libibverbs.so.1 on the host (network namespace rxehost,
# 10.99.0.1) and kernel rxe in a QEMU guest (10.99.0.2), every RoCE packet on the bridge
# captured and its ICRC checked by an independent implementation. softrnic is the client
# first, then the server (rxe connecting to it).
#
# It uses the steering side's rxe lab (../shared/rxe-lab beside the repository: a Debian guest
# with rdma_rxe under QEMU/TCG; its README is run.sh's header). Needs root, network access to
# Debian's mirror the first time (debootstrap, about 2 minutes), and tcpdump. Not part of the
# test suite: a manual check, about 3 minutes after the first run.
#
# usage: testbed/rxe_interop.sh [LAB_DIR]     (LAB_DIR default: ../shared/rxe-lab)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
LAB=${1:-$REPO/../shared/rxe-lab}
[ -x "$LAB/run.sh" ] || { echo "rxe_interop: no rxe lab at $LAB" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "rxe_interop: needs root (network namespaces, QEMU taps)" >&2; exit 2; }
export RXE_LAB=${RXE_LAB:-/tmp/rxe-lab}

cargo build --release -q -p softrnic-tools -p softrnic-ibverbs -p softrnic-rdmacm -p softrnic-mlx5-standin -p softrnic-efa-standin
S=$REPO/target/release/softrnic

"$LAB/run.sh" prep
"$LAB/stop-guests.sh" >/dev/null 2>&1 || true
"$LAB/start-guest.sh" 1 tcg
for _ in $(seq 1 300); do grep -q -a RXE_READY "$RXE_LAB/g1.log" 2>/dev/null && break; sleep 1; done
grep -q -a RXE_READY "$RXE_LAB/g1.log" || { echo "rxe_interop: the guest did not boot" >&2; exit 1; }
trap '"$LAB/stop-guests.sh" >/dev/null 2>&1 || true' EXIT

cd "$RXE_LAB"
guest() { "$LAB/gsh.py" g1.sock "$1" "$2" | grep -v -E 'stty|__END' || true; }
pcap=$RXE_LAB/pcaps/softrnic_interop.pcap
ip netns exec rxehost tcpdump -i br0 -s 0 -U -w "$pcap" 'udp port 4791' >/dev/null 2>&1 &
tcpdump_pid=$!
sleep 1
failed=0

# $1: name; $2: the rxe server (guest); $3: the softrnic client (host), which connects to
# 10.99.0.2. Prints the client's last result line and the server's.
pair() {
  guest 20 "($2 > /tmp/srv.log 2>&1 &)" >/dev/null
  sleep 3
  local out
  if out=$(ip netns exec rxehost timeout 300 "$S" run --addr 10.99.0.1 -- $3 10.99.0.2 2>&1); then
    echo "ok   $1: $(echo "$out" | grep -E 'iters in|^ [0-9]' | tail -1 | tr -s ' \t' ' ')"
  else
    echo "FAIL $1:"; echo "$out" | tail -5; failed=1
  fi
  sleep 2
  echo "     rxe: $(guest 10 'cat /tmp/srv.log' | grep -E 'iters in|^ [0-9]|[Ff]ail' | tail -1 | tr -s ' \t' ' ')"
}

pair "ibv_rc_pingpong -c"           "ibv_rc_pingpong -d rxe0 -g 1 -n 50 -c"          "ibv_rc_pingpong -g 1 -n 50 -c"
pair "ibv_rc_pingpong -s 65536 -c"  "ibv_rc_pingpong -d rxe0 -g 1 -n 20 -s 65536 -c" "ibv_rc_pingpong -g 1 -n 20 -s 65536 -c"
pair "ibv_uc_pingpong -c"           "ibv_uc_pingpong -d rxe0 -g 1 -n 20 -c"          "ibv_uc_pingpong -g 1 -n 20 -c"
pair "ibv_ud_pingpong -c"           "ibv_ud_pingpong -d rxe0 -g 1 -n 20 -s 512 -c"   "ibv_ud_pingpong -g 1 -n 20 -s 512 -c"
pair "ibv_srq_pingpong -c"          "ibv_srq_pingpong -d rxe0 -g 1 -n 20 -c"         "ibv_srq_pingpong -g 1 -n 20 -c"
# -Q 100: every 100th WR signaled, so softrnic's requester leaves AckReq off the others and
# rxe's responder, which ACKs only what asks, must still let every WR complete.
for t in "ib_write_bw -s 65536" "ib_read_bw -s 65536" "ib_send_bw -s 65536" "ib_atomic_bw" \
         "ib_write_bw -s 65536 -Q 100" "ib_send_bw -s 65536 -Q 100" \
         "ib_write_lat" "ib_send_lat" "ib_read_lat"; do
  pair "$t" "$t -d rxe0 -x 1 -F -n 200" "$t -x 1 -F -n 200"
done

# The other way round: softrnic serves (host), rxe connects (guest) to 10.99.0.1.
rpair() {
  ip netns exec rxehost timeout 300 "$S" run --addr 10.99.0.1 -- $2 >/tmp/softrnic_srv.log 2>&1 &
  local srv=$!
  sleep 2
  local out
  out=$(guest 300 "$3 10.99.0.1")
  if wait "$srv"; then
    echo "ok   $1 (rxe client): $(echo "$out" | grep -E 'iters in|^ [0-9]' | tail -1 | tr -s ' \t' ' ')"
  else
    echo "FAIL $1 (rxe client):"; tail -5 /tmp/softrnic_srv.log; failed=1
  fi
  sleep 1
}

rpair "ibv_rc_pingpong -c"          "ibv_rc_pingpong -g 1 -n 50 -c"           "ibv_rc_pingpong -d rxe0 -g 1 -n 50 -c"
rpair "ibv_rc_pingpong -s 65536 -c" "ibv_rc_pingpong -g 1 -n 20 -s 65536 -c"  "ibv_rc_pingpong -d rxe0 -g 1 -n 20 -s 65536 -c"
rpair "ibv_ud_pingpong -c"          "ibv_ud_pingpong -g 1 -n 20 -s 512 -c"    "ibv_ud_pingpong -d rxe0 -g 1 -n 20 -s 512 -c"
for t in "ib_write_bw -s 65536" "ib_read_bw -s 65536" "ib_atomic_bw"; do
  rpair "$t" "$t -x 1 -F -n 200" "$t -d rxe0 -x 1 -F -n 200"
done

sleep 1
kill "$tcpdump_pid"; wait "$tcpdump_pid" 2>/dev/null || true
echo "ICRC of every RoCE packet on the bridge: $(python3 "$LAB/icrc_check.py" "$pcap" | tail -1)"
python3 "$LAB/icrc_check.py" "$pcap" | tail -1 | grep -q 'roce_bad=0' || failed=1
exit $failed
