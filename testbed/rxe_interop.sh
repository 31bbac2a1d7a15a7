#!/usr/bin/env bash
# softrnic against the Linux kernel's Soft-RoCE (rdma_rxe): unmodified rdma-core and perftest
# programs, softrnic's drop-in libibverbs.so.1 on the host (network namespace rxehost,
# 10.99.0.1) and kernel rxe in a QEMU guest (10.99.0.2), every RoCE packet on the bridge
# captured and its ICRC checked by an independent implementation. softrnic is the client
# first, then the server (rxe connecting to it). Then rdma_cm, with softrnic's drop-in
# librdmacm.so.1 against the kernel's rdma_cm: rping (IPv4 and IPv6), udaddy (UD, SIDR),
# mckey (multicast), ib_write_bw -R and librpma (when this host can build its test program), each both ways,
# every side's exit status checked; at the end, the CM MADs on the wire and whether each DREQ
# got its DREP.
#
# It uses the steering side's rxe lab (../shared/rxe-lab beside the repository: a Debian guest
# with rdma_rxe under QEMU/TCG; its README is run.sh's header). Needs root, network access to
# Debian's mirror the first time (debootstrap, about 2 minutes), and tcpdump. Not part of the
# test suite: a manual check, about 5 minutes after the first run.
#
# usage: testbed/rxe_interop.sh [LAB_DIR]     (LAB_DIR default: ../shared/rxe-lab)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
LAB=${1:-$REPO/../shared/rxe-lab}
[ -x "$LAB/run.sh" ] || { echo "rxe_interop: no rxe lab at $LAB" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "rxe_interop: needs root (network namespaces, QEMU taps)" >&2; exit 2; }

cargo build --release -q -p softrnic-tools -p softrnic-ibverbs -p softrnic-rdmacm -p softrnic-mlx5-standin -p softrnic-efa-standin
S=$REPO/target/release/softrnic

# librpma's own rdma_cm use (uapi/ibverbs/tests/c/rpma_test.c), if this host can build it: the
# guest has librpma0 but no compiler, so the program built here (Debian bookworm, as the
# guest) goes into the guest's root filesystem, which prep packs into its initramfs.
export RXE_LAB=${RXE_LAB:-/tmp/rxe-lab}
rpma=""
if [ -f /usr/include/librpma.h ] && command -v gcc >/dev/null; then
  mkdir -p "$RXE_LAB"
  rpma=$RXE_LAB/rpma_test
  gcc -O1 -Wall -o "$rpma" uapi/ibverbs/tests/c/rpma_test.c -lrpma -libverbs || rpma=""
fi

"$LAB/run.sh" prep
if [ -n "$rpma" ] && ! cmp -s "$rpma" "$RXE_LAB/rootfs/usr/local/bin/rpma_test"; then
  install -D "$rpma" "$RXE_LAB/rootfs/usr/local/bin/rpma_test"
  "$LAB/run.sh" prep   # the initramfs again, with it
fi
"$LAB/stop-guests.sh" >/dev/null 2>&1 || true
"$LAB/start-guest.sh" 1 tcg
for _ in $(seq 1 300); do grep -q -a RXE_READY "$RXE_LAB/g1.log" 2>/dev/null && break; sleep 1; done
grep -q -a RXE_READY "$RXE_LAB/g1.log" || { echo "rxe_interop: the guest did not boot" >&2; exit 1; }
trap '"$LAB/stop-guests.sh" >/dev/null 2>&1 || true' EXIT

cd "$RXE_LAB"
guest() { "$LAB/gsh.py" g1.sock "$1" "$2" | grep -v -E 'stty|__END' || true; }
pcap=$RXE_LAB/pcaps/softrnic_interop.pcap
# --immediate-mode: without it, on this kernel (6.18) libpcap's ring handed tcpdump nothing of
# a short run before it was stopped ("41 packets received by filter, 0 captured").
ip netns exec rxehost tcpdump --immediate-mode -i br0 -s 0 -U -w "$pcap" 'udp port 4791' \
  >/dev/null 2>&1 &
tcpdump_pid=$!
sleep 1
failed=0

# Prints the RoCE packets captured since the last call, and how many of them had a bad ICRC.
seen_ok=0 seen_bad=0
wire() {
  local c ok bad
  c=$(python3 "$LAB/icrc_check.py" "$pcap" | tail -1) || true
  ok=$(echo "$c" | sed -n 's/.*roce_ok=\([0-9]*\).*/\1/p')
  bad=$(echo "$c" | sed -n 's/.*roce_bad=\([0-9]*\).*/\1/p')
  echo "     wire: $((ok + bad - seen_ok - seen_bad)) RoCE packets, $((bad - seen_bad)) with a bad ICRC"
  seen_ok=$ok seen_bad=$bad
  # (A broad `pkill tcpdump` elsewhere on the machine once ended it in the middle of a run.)
  kill -0 "$tcpdump_pid" 2>/dev/null || { echo "FAIL the capture stopped: tcpdump is gone"; exit 1; }
}

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
  wire
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
  wire
}

rpair "ibv_rc_pingpong -c"          "ibv_rc_pingpong -g 1 -n 50 -c"           "ibv_rc_pingpong -d rxe0 -g 1 -n 50 -c"
rpair "ibv_rc_pingpong -s 65536 -c" "ibv_rc_pingpong -g 1 -n 20 -s 65536 -c"  "ibv_rc_pingpong -d rxe0 -g 1 -n 20 -s 65536 -c"
rpair "ibv_ud_pingpong -c"          "ibv_ud_pingpong -g 1 -n 20 -s 512 -c"    "ibv_ud_pingpong -d rxe0 -g 1 -n 20 -s 512 -c"
for t in "ib_write_bw -s 65536" "ib_read_bw -s 65536" "ib_atomic_bw"; do
  rpair "$t" "$t -x 1 -F -n 200" "$t -d rxe0 -x 1 -F -n 200"
done

# "$1" with "{}" replaced by "$2", or "$1 $2" if it has none.
with_addr() {
  case $1 in
    *{}*) echo "${1//\{\}/$2}" ;;
    *) echo "$1 $2" ;;
  esac
}

# rdma_cm: the CMs connect the QPs (REQ/REP/RTU, or SIDR_REQ/SIDR_REP for UD, then DREQ/DREP,
# as MADs on QP1), with softrnic's librdmacm.so.1 on the host and the kernel's rdma_cm in the
# guest. Both sides' exit statuses count.
# $1: name; $2: the rxe server (guest); $3: the softrnic client (host), completed with the
# guest's address; $4: what the client prints when it worked. CM_HOST and CM_GUEST: the
# addresses (default 10.99.0.1 and 10.99.0.2).
cm_pair() {
  local out ok srv attempt
  for attempt in 1 2 3 4 5; do
    guest 20 "(($2 > /tmp/srv.log 2>&1 & echo \$! > /tmp/srv.pid; wait \$!; echo server rc=\$? >> /tmp/srv.log) &)" >/dev/null
    sleep 3
    ok=1
    out=$(ip netns exec rxehost timeout 300 "$S" run --addr "${CM_HOST:-10.99.0.1}" -- \
      $(with_addr "$3" "${CM_GUEST:-10.99.0.2}") 2>&1) || ok=0
    echo "$out" > "$RXE_LAB/logs/cm_client.log"
    echo "$out" | grep -q -E "$4" || ok=0
    # The server ends after its client; one whose client failed may wait forever: stop it.
    for _ in $(seq 1 $((ok ? 30 : 3))); do
      srv=$(guest 10 'cat /tmp/srv.log')
      srv=${srv//$'\r'/}
      echo "$srv" | grep -q 'server rc=' && break
      sleep 2
    done
    echo "$srv" | grep -q 'server rc=' || guest 10 'kill $(cat /tmp/srv.pid)' >/dev/null
    echo "$srv" | grep -q 'server rc=0' || ok=0
    # perftest's -R client sends its test connection's REQ as soon as the parameter exchange
    # ends, racing the server's rdma_listen; the server under TCG loses now and then, and its
    # kernel rejects the REQ (reason 8: nobody listens), as it would any peer's. perftest 4.5
    # then retries with the ids it has just destroyed, and gives up. So: again.
    # (rpma_test says NOT LISTENING then.)
    if [ $ok = 0 ] && echo "$out" | grep -q -E 'RDMA_CM_EVENT_REJECTED; error: 8|NOT LISTENING'
    then
      echo "     attempt $attempt: the REQ came before the rxe server listened (REJ 8)"
      sleep 2
      continue
    fi
    break
  done
  if [ $ok = 1 ]; then
    echo "ok   $1: $(echo "$out" | grep -E "$4" | tail -1 | tr -s ' \t' ' ')"
  else
    echo "FAIL $1:"; echo "$out" | tail -12; failed=1
  fi
  echo "     rxe: $(echo "$srv" | grep -E "$4|server rc=|[Ff]ail|rror" | tail -2 | tr -s ' \t\n' ' ')"
  sleep 2
  wire
}

# The other way round: softrnic serves ($2), the rxe client ($3) connects to the host.
cm_rpair() {
  ip netns exec rxehost timeout 300 "$S" run --addr "${CM_HOST:-10.99.0.1}" -- $2 \
    >/tmp/softrnic_srv.log 2>&1 &
  local srv=$! out ok=1
  sleep 2
  out=$(guest 300 "$(with_addr "$3" "${CM_HOST:-10.99.0.1}"); echo client rc=\$?")
  out=${out//$'\r'/}   # the serial console's line ends
  wait "$srv" || ok=0
  echo "$out" | grep -q 'client rc=0' || ok=0
  echo "$out" | grep -q -E "$4" || ok=0
  if [ $ok = 1 ]; then
    echo "ok   $1 (rxe client): $(echo "$out" | grep -E "$4" | tail -1 | tr -s ' \t' ' ')"
  else
    echo "FAIL $1 (rxe client):"; echo "$out" | tail -12; tail -12 /tmp/softrnic_srv.log; failed=1
  fi
  sleep 2
  wire
}

rping_ok='rdma-ping-9:'
cm_pair  "rping -C 10"  "rping -s -v -C 10 -a 10.99.0.2"  "rping -c -v -C 10 -a"  "$rping_ok"
cm_rpair "rping -C 10"  "rping -s -v -C 10 -a 10.99.0.1"  "rping -c -v -C 10 -a"  "$rping_ok"
# Over IPv6 rxe sends UDP checksum 0, which a socket must ask for (UDP_NO_CHECK6_RX).
CM_HOST=fd99::1 CM_GUEST=fd99::2 \
  cm_pair  "rping -C 10 (IPv6)" "rping -s -v -C 10 -a fd99::2" "rping -c -v -C 10 -a" "$rping_ok"
CM_HOST=fd99::1 \
  cm_rpair "rping -C 10 (IPv6)" "rping -s -v -C 10 -a fd99::1" "rping -c -v -C 10 -a" "$rping_ok"
cm_pair  "udaddy"       "udaddy"                          "udaddy -s"             'return status 0'
cm_rpair "udaddy"       "udaddy"                          "udaddy -s"             'return status 0'
# Multicast: the receiver joins first (the sender starts 2-3 s later and sends 3 s after its
# own join); a sender's extra address argument is one mckey ignores.
cm_pair  "mckey"        "mckey -m 239.1.99.1 -b 10.99.0.2"  "mckey -s -m 239.1.99.1 -b 10.99.0.1" \
  'return status 0'
cm_rpair "mckey"        "mckey -m 239.1.99.2 -b 10.99.0.1"  "mckey -s -m 239.1.99.2 -b 10.99.0.2" \
  'return status 0'
bw="ib_write_bw -x 1 -F -R -s 65536 -n 200"
cm_pair  "$bw" "${bw/ib_write_bw/ib_write_bw -d rxe0}" "$bw"                      '^ 65536 '
cm_rpair "$bw" "$bw"                      "${bw/ib_write_bw/ib_write_bw -d rxe0}" '^ 65536 '
if [ -n "$rpma" ]; then
  cm_pair  "librpma (rpma_test)" "rpma_test server 10.99.0.2 7204" "$rpma client {} 7204" \
    ': PASS'
  cm_rpair "librpma (rpma_test)" "$rpma server 10.99.0.1 7205" "rpma_test client {} 7205" \
    ': PASS'
else
  echo "skip librpma: no gcc, librpma-dev or guest root filesystem here"
fi

sleep 1
kill "$tcpdump_pid" || true; wait "$tcpdump_pid" 2>/dev/null || true
# The CM's MADs on the bridge, by kind, and every DREQ's DREP (found by its two
# Communication IDs, swapped): a DREQ left unanswered means a CM gone silent.
python3 - "$pcap" <<'PY'
import collections, struct, sys
names = {0x10: 'REQ', 0x11: 'MRA', 0x12: 'REJ', 0x13: 'REP', 0x14: 'RTU', 0x15: 'DREQ',
         0x16: 'DREP', 0x17: 'SIDR_REQ', 0x18: 'SIDR_REP'}
kinds, dreqs, dreps = collections.Counter(), set(), set()
with open(sys.argv[1], 'rb') as f:
    e = '<' if struct.unpack('<I', f.read(24)[:4])[0] == 0xa1b2c3d4 else '>'
    while len(h := f.read(16)) == 16:
        frame = f.read(struct.unpack(e + 'I', h[8:12])[0])
        if frame[12:14] == b'\x08\x00':
            udp = 14 + (frame[14] & 0x0f) * 4
        elif frame[12:14] == b'\x86\xdd':
            udp = 14 + 40
        else:
            continue
        if frame[udp + 8 + 4:udp + 8 + 8][1:] != b'\x00\x00\x01':  # BTH DestQP: QP1
            continue
        mad = frame[udp + 8 + 12 + 8:]
        attr = struct.unpack('!H', mad[16:18])[0]
        kinds[names.get(attr, hex(attr))] += 1
        ids = (mad[24:28], mad[28:32])
        if attr == 0x15: dreqs.add(ids)
        if attr == 0x16: dreps.add(ids[::-1])
print('CM MADs on the bridge: ' + ', '.join(f'{k} {n}' for k, n in sorted(kinds.items())))
print(f'DREQs without a DREP: {len(dreqs - dreps)} of {len(dreqs)}')
PY
echo "ICRC of every RoCE packet on the bridge: $(python3 "$LAB/icrc_check.py" "$pcap" | tail -1)"
python3 "$LAB/icrc_check.py" "$pcap" | tail -1 | grep -q 'roce_bad=0' || failed=1
exit $failed
