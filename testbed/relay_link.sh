#!/usr/bin/env bash
# Two hosts joined by a userspace relay: network namespaces sr74a (10.74.0.1) and sr74b
# (10.74.0.2), each with a veth whose peer is in the relay namespace sr74r, where
# packet-relay (testbed/src/bin/packet_relay.rs) copies every frame from one peer to the
# other through AF_PACKET sockets. A hop that is not the kernel's own forwarding, where
# impairments can be added in userspace (this kernel has no sch_netem).
#
# Runs SERVER_CMD in sr74b, waits a moment, runs CLIENT_CMD in sr74a, waits for both, prints
# the relay's counters and each end's drop counters, and removes everything on exit. Extra
# RELAY_ARGS (e.g. --no-vnet) go to the relay. OFFLOAD_OFF (e.g. 'tx off gso off tso off')
# are ethtool -K features set on both ends: frames as on a wire. NET (default 74) numbers
# the namespaces, interfaces and subnet (srNETa, 10.NET.0.1, ...), so that two links can
# exist at once (testbed/tests/soak.rs uses 75). Needs root.
#
# usage: testbed/relay_link.sh 'SERVER_CMD' 'CLIENT_CMD' [RELAY_ARGS...]
#   e.g. testbed/relay_link.sh \
#     'target/release/softrnic run --addr 10.74.0.2 -- ib_read_bw -x 1 -p 18515' \
#     'target/release/softrnic run --addr 10.74.0.1 -- ib_read_bw -x 1 -p 18515 10.74.0.2'
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "relay_link: needs root (network namespaces)" >&2; exit 2; }
[ $# -ge 2 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
SERVER=$1 CLIENT=$2
shift 2
RELAY=${RELAY:-target/release/packet-relay}
[ -x "$RELAY" ] || cargo build --release -q -p softrnic-testbed
NET=${NET:-74}
A=sr${NET}a B=sr${NET}b R=sr${NET}r
relay_pid=
teardown() {
    [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
    for ns in $A $B $R; do ip netns del $ns 2>/dev/null || true; done
}
trap teardown EXIT
teardown
for ns in $A $B $R; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add ${A}0 netns $A type veth peer name ${R}a netns $R
ip link add ${B}0 netns $B type veth peer name ${R}b netns $R
ip -n $A addr add 10.$NET.0.1/24 dev ${A}0
ip -n $B addr add 10.$NET.0.2/24 dev ${B}0
for l in ${R}a ${R}b; do ip -n $R link set $l up; done
ip -n $A link set ${A}0 up
if [ -n "${OFFLOAD_OFF:-}" ]; then
    # Frames as on a wire: runs cut and checksums filled in where they leave each end.
    ip netns exec $A ethtool -K ${A}0 $OFFLOAD_OFF >/dev/null
    ip netns exec $B ethtool -K ${B}0 $OFFLOAD_OFF >/dev/null
fi
ip -n $B link set ${B}0 up
ip netns exec $R "$RELAY" ${R}a ${R}b "$@" &
relay_pid=$!
sleep 0.3 # (the relay binds before the ends talk)
ip netns exec $B nstat -n
ip netns exec $A nstat -n
ip netns exec $B sh -c "$SERVER" &
server=$!
sleep 1
status=0
ip netns exec $A sh -c "$CLIENT" || status=$?
wait $server || status=$?
kill "$relay_pid"; wait "$relay_pid" 2>/dev/null || true
relay_pid=
for ns in $A $B; do
    echo "== $ns: nstat (UDP/IP drops), link"
    ip netns exec $ns nstat -a 2>/dev/null | grep -Ei 'udp.*(err|drop)|InDiscards|RcvbufErrors' || true
    ip -n $ns -s link show dev ${ns}0 | sed -n '3,6p'
done
exit $status
