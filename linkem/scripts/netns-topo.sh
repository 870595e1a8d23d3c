#!/bin/bash
# Three-namespace test topology for linkem:  a <-veth-> r <-veth-> b
#   a: 10.213.1.1/30 (dev va)   r: 10.213.1.2/30 (ra), 10.213.2.1/30 (rb)   b: 10.213.2.2/30 (vb)
# r forwards; iptables in r sends a->b to NFQUEUE 10 and b->a to NFQUEUE 11 (`rules`).
# Offloads are off on every veth so that packets are MSS-sized.
#
# usage: netns-topo.sh up SUFFIX | rules SUFFIX | norules SUFFIX | down SUFFIX
# Namespaces are named lkdev-{a,r,b}-SUFFIX; `down` deletes exactly those three.
set -euo pipefail
cmd=${1:?usage}; sfx=${2:?suffix}
A=lkdev-a-$sfx; R=lkdev-r-$sfx; B=lkdev-b-$sfx

case $cmd in
up)
    for n in $A $R $B; do ip netns add $n; ip -n $n link set lo up; done
    ip -n $A link add va type veth peer name ra netns $R
    ip -n $B link add vb type veth peer name rb netns $R
    ip -n $A addr add 10.213.1.1/30 dev va
    ip -n $R addr add 10.213.1.2/30 dev ra
    ip -n $R addr add 10.213.2.1/30 dev rb
    ip -n $B addr add 10.213.2.2/30 dev vb
    for d in "$A va" "$R ra" "$R rb" "$B vb"; do
        set -- $d
        ip -n $1 link set $2 up
        ip netns exec $1 ethtool -K $2 tso off gso off gro off >/dev/null 2>&1 || true
    done
    ip -n $A route add default via 10.213.1.2
    ip -n $B route add default via 10.213.2.1
    ip netns exec $R sysctl -qw net.ipv4.ip_forward=1
    for n in $A $B; do
        ip netns exec $n sysctl -qw net.ipv4.tcp_congestion_control=bbr
        ip netns exec $n sysctl -qw net.ipv4.tcp_rmem="4096 131072 67108864"
        ip netns exec $n sysctl -qw net.ipv4.tcp_wmem="4096 16384 67108864"
        ip netns exec $n sysctl -qw net.ipv4.tcp_no_metrics_save=1
    done
    ;;
rules)
    ip netns exec $R iptables -A FORWARD -i ra -j NFQUEUE --queue-num 10
    ip netns exec $R iptables -A FORWARD -i rb -j NFQUEUE --queue-num 11
    ;;
norules)
    ip netns exec $R iptables -F FORWARD
    ;;
down)
    for n in $A $R $B; do ip netns del $n 2>/dev/null || true; done
    ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac
