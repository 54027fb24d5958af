#!/usr/bin/env bash
# Two hosts on one machine for distributed n-gram estimation: a Dask scheduler and one
# worker in each of two Linux network namespaces joined by a veth pair, so the shuffles
# cross a real network interface with its own addresses; then the same model estimated in
# one process, and every n-gram, probability and back-off compared (equal to the bit).
#
#   sudo bench/ngram/two_hosts_dask.sh OUT ORDER SHARD [SHARD ...]
#   sudo bench/ngram/two_hosts_dask.sh /tmp/2h 5 data/shards/*.txt
#
#   host 0: namespace nnlm-d-h0, veth nnlm-d-v0, 10.78.0.1/24: the scheduler, a worker, the client
#   host 1: namespace nnlm-d-h1, veth nnlm-d-v1, 10.78.0.2/24: a worker
#
# Needs root (ip netns, ip link) and the distributed extra. Both namespaces share the file
# system, so each worker reads the shards it is given. The namespaces, the veth pair and
# the processes are removed on exit, whatever happens. Environment: PYTHON (default: the
# python on PATH), PORT (default 8786). Exit status 0 when the models are equal.
set -euo pipefail
if [[ $# -lt 3 ]]; then sed -n '2,16p' "$0"; exit 2; fi
if [[ $(id -u) -ne 0 ]]; then
    echo "two_hosts_dask.sh: network namespaces need root; run it with sudo" >&2; exit 2
fi
out=$1 order=$2; shift 2
python=${PYTHON:-python}
port=${PORT:-8786}
dask_bin=$(dirname "$(command -v "$python")")/dask
pids=()

source "$(dirname "$0")/../netns.sh"
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    netns_down nnlm-d
}
trap cleanup EXIT
netns_up nnlm-d 10.78.0
mkdir -p "$out"
ip netns exec nnlm-d-h0 "$dask_bin" scheduler --host 10.78.0.1 --port "$port" \
    --no-dashboard >"$out/scheduler.log" 2>&1 &
pids+=($!)
for i in 0 1; do
    ip netns exec nnlm-d-h$i "$dask_bin" worker "tcp://10.78.0.1:$port" \
        --host 10.78.0.$((i + 1)) --nthreads 1 --nworkers 1 --no-dashboard \
        --local-directory "$out/worker$i" >"$out/worker$i.log" 2>&1 &
    pids+=($!)
done
# wait for both workers to join
ip netns exec nnlm-d-h0 "$python" - "$port" <<'PY'
import sys, time
from distributed import Client
c = Client(f"tcp://10.78.0.1:{sys.argv[1]}", timeout="60s")
deadline = time.monotonic() + 60
while len(c.scheduler_info()["workers"]) < 2:
    if time.monotonic() > deadline:
        sys.exit("two_hosts_dask.sh: the workers did not join within 60 s")
    time.sleep(0.2)
print("workers:", sorted(c.scheduler_info()["workers"]))
PY
start=$(date +%s.%N)
ip netns exec nnlm-d-h0 "$python" -m nnlm ngram train "$@" --order "$order" \
    --cluster "tcp://10.78.0.1:$port" -o "$out/two_hosts"
echo "two hosts: $(echo "$(date +%s.%N) - $start" | bc) s"
"$python" -m nnlm ngram train "$@" --order "$order" -o "$out/one_process"
"$python" "$(dirname "$0")/distributed.py" --compare "$out/two_hosts" "$out/one_process"
