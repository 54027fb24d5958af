#!/usr/bin/env bash
# Two hosts on one machine: torchrun across two Linux network namespaces joined by a veth
# pair, so that multi-node training (--nnodes 2) runs over a real network interface with its
# own addresses, and the traffic never leaves this machine.
#
#   sudo bench/neural/two_hosts.sh [--procs-per-host N] -- TRAIN VALID CKPT [nnlm train options]
#   sudo bench/neural/two_hosts.sh -- data/brown/train.txt data/brown/valid.txt runs/2hosts \
#       --preset mlp1 --max-steps 300                 # add --output-parallel to split U, W, b
#
#   host 0: namespace nnlm-h0, veth nnlm-v0, 10.77.0.1/24 (torchrun's rendezvous)
#   host 1: namespace nnlm-h1, veth nnlm-v1, 10.77.0.2/24
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: ip netns, ip link). Both namespaces share
# the file system, so both hosts read the same TRAIN and VALID, and global rank 0 writes
# CKPT. The namespaces and the veth pair are removed on exit, whatever happens.
# Environment: PYTHON (default: the python on PATH), PORT (default 29611), GRACE (seconds
# the other host gets to end once one host failed, default 20).
set -euo pipefail

procs=1
while [[ $# -gt 0 && $1 != -- ]]; do
    case $1 in
        --procs-per-host) procs=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "two_hosts.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ ${1:-} == -- ]] && shift
if [[ $# -lt 3 ]]; then
    echo "two_hosts.sh: need TRAIN VALID CKPT after -- (see --help)" >&2; exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "two_hosts.sh: network namespaces need root; run it with sudo" >&2; exit 2
fi
python=${PYTHON:-python}
port=${PORT:-29611}

source "$(dirname "$0")/../netns.sh"
trap 'netns_down nnlm' EXIT
netns_up nnlm 10.77.0
if command -v ping >/dev/null; then ip netns exec nnlm-h0 ping -c 1 -W 2 10.77.0.2 >/dev/null; fi

pids=()
for i in 0 1; do
    # GLOO_SOCKET_IFNAME: gloo would otherwise look its address up by host name, which
    # names no interface inside the namespace
    ip netns exec nnlm-h$i env GLOO_SOCKET_IFNAME=nnlm-v$i NCCL_SOCKET_IFNAME=nnlm-v$i \
        "$python" -m torch.distributed.run --nnodes 2 --node-rank $i \
        --nproc-per-node "$procs" --master-addr 10.77.0.1 --master-port "$port" \
        -m nnlm train "$1" --valid "$2" -o "$3" "${@:4}" &
    pids+=($!)
done
# The first host to end decides: if it failed, the other host's torchrun would wait out
# its 300 s exit barrier for a peer that is gone, so it gets GRACE seconds and is stopped.
status=0
first=
wait -n -p first "${pids[@]}" || status=$?
if [[ $status -ne 0 ]]; then
    for _ in $(seq "${GRACE:-20}"); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [[ $alive -eq 1 ]] || break
        sleep 1
    done
    for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            echo "two_hosts.sh: a host failed (exit $status); stopping the other" >&2
            # SIGKILL: torchrun's agent takes SIGTERM only once its barrier returns; its
            # workers have ended (or end with their process group's peer gone)
            pkill -KILL -P "$pid" 2>/dev/null || true
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
fi
for pid in "${pids[@]}"; do
    [[ $pid == "$first" ]] && continue
    wait "$pid" || { rc=$?; [[ $status -ne 0 ]] || status=$rc; }
done
exit $status
