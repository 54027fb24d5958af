# Two "hosts" on one machine: sourced by bench/neural/two_hosts.sh (torchrun) and
# bench/ngram/two_hosts_dask.sh (Dask). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
#
#   netns_up PREFIX SUBNET   namespaces PREFIX-h0 and PREFIX-h1 joined by the veth pair
#                            PREFIX-v0 / PREFIX-v1, with addresses SUBNET.1 and SUBNET.2 /24
#   netns_down PREFIX        remove them (deleting a namespace removes its veth end)

netns_down() {
    ip netns del "$1-h0" 2>/dev/null || true
    ip netns del "$1-h1" 2>/dev/null || true
    ip link del "$1-v0" 2>/dev/null || true
}

netns_up() {
    local prefix=$1 subnet=$2 i
    netns_down "$prefix"
    ip netns add "$prefix-h0"
    ip netns add "$prefix-h1"
    ip link add "$prefix-v0" type veth peer name "$prefix-v1"
    for i in 0 1; do
        ip link set "$prefix-v$i" netns "$prefix-h$i"
        ip -n "$prefix-h$i" addr add "$subnet.$((i + 1))/24" dev "$prefix-v$i"
        ip -n "$prefix-h$i" link set "$prefix-v$i" up
        ip -n "$prefix-h$i" link set lo up
    done
}
