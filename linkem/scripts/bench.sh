#!/bin/bash
# Measure linkem for real: builds lkdev-{a,r,b}-$$ (see netns-topo.sh), runs iperf3 / ping,
# prints the figures, and deletes exactly the namespaces it created.
# usage: bench.sh [SECONDS]   (root; needs iperf3, ping, ethtool, iptables)
set -euo pipefail
T=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
LINKEM=${LINKEM:-$here/../../target/release/linkem}
sfx=$$
A=lkdev-a-$sfx; R=lkdev-r-$sfx; B=lkdev-b-$sfx
work=$(mktemp -d /tmp/linkem-bench.XXXXXX)
lpid=""

cleanup() {
    [ -n "$lpid" ] && kill -TERM "$lpid" 2>/dev/null && wait "$lpid" 2>/dev/null || true
    "$here/netns-topo.sh" down $sfx
    rm -rf "$work"
}
trap cleanup EXIT

"$here/netns-topo.sh" up $sfx

start_linkem() { # $1 = fwd delay us, $2 = extra json for forward direction
    cat > "$work/c.json" <<JSON
{"seed": 42, "stats_path": "$work/stats.json", "stats_interval_ms": 200,
 "directions": [{"name": "forward", "queue": 10, "delay_us": $1 $2},
                {"name": "reverse", "queue": 11, "delay_us": $1}]}
JSON
    ip netns exec $R "$LINKEM" --config "$work/c.json" > "$work/linkem.out" 2> "$work/linkem.err" &
    lpid=$!
    for _ in $(seq 100); do grep -q "linkem ready" "$work/linkem.out" 2>/dev/null && return 0; sleep 0.05; done
    echo "linkem did not become ready"; cat "$work/linkem.err"; exit 1
}
stop_linkem() {
    kill -TERM "$lpid"; local rc=0; wait "$lpid" || rc=$?; lpid=""
    echo "  linkem exit code $rc; final stats: $(cat "$work/stats.json")"
}
iperf() { # prints receiver bitrate
    ip netns exec $B iperf3 -s -1 -D -p 5201 --logfile "$work/iperf-s.log"
    sleep 0.3
    ip netns exec $A iperf3 -c 10.213.2.2 -p 5201 -t "$T" -J > "$work/iperf.json"
    python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['end']; print('  %.0f Mbit/s (receiver), %d retransmits' % (e['sum_received']['bits_per_second']/1e6, e['sum_sent'].get('retransmits',0)))" "$work/iperf.json"
}

echo "== (1) no linkem, no rule: iperf3 ${T}s"
iperf
"$here/netns-topo.sh" rules $sfx

echo "== (2) linkem 0 ms: iperf3 ${T}s"
start_linkem 0 ""
iperf
ip netns exec $A ping -q -c 20 -i 0.05 10.213.2.2 | tail -1
stop_linkem

echo "== (3) linkem 150 ms each way (300 ms RTT), BBR: ping, iperf3 ${T}s"
start_linkem 150000 ""
ip netns exec $A ping -q -c 20 -i 0.05 10.213.2.2 | tail -1
iperf
stop_linkem

echo "== (4) random loss 10 % forward only, 1 ms each way: ping -f -c 20000"
start_linkem 1000 ', "loss": {"model": "random", "p": 0.1}'
ip netns exec $A ping -q -f -c 20000 10.213.2.2 | tail -2
stop_linkem
