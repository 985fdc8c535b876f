#!/usr/bin/env bash
# make bench: what a probe costs the traced process (ratios measured side by
# side in one run) and how fast the span builder is. Results go to stdout;
# BENCHMARKS.md records a run.
set -euo pipefail
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
# pinned CMD ARGS...: the workload CMD measures runs on CPU 0 (-pin-target 0)
# and CMD, with specprobe's reader, on the others, so the numbers are what is
# measured, not a fight over one core.
pinned() {
	if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
		$sudo taskset -c 1-$(($(nproc) - 1)) "$@" -pin-target 0
	else
		$sudo "$@"
	fi
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
{
echo "== probe cost per hit on bench/callloop (entry + exit probes, uprobe_multi)"
go build -o bin/probecost ./bench/probecost
pinned ./bin/probecost -target bench/callloop -calls 50000 -rounds 7
echo
echo "== CUDA driver probes: cost per launch and per sync on a stand-in libcuda (bench/cudacost)"
go build -o bin/cudacost ./bench/cudacost
pinned ./bin/cudacost -calls 20000 -rounds 7
echo
echo "== span builder throughput (one core)"
GOMAXPROCS=1 go test -run '^$' -bench 'BenchmarkBuilder' -benchtime 2s -cpu 1 ./spanbuilder
echo
echo "== GPU sampler against go-nvml's 8xH200 mock: time per sample, NVML calls/s at the default intervals, cost per stage span"
GOMAXPROCS=1 go test -run '^$' -bench 'BenchmarkSampler|BenchmarkStageAttrs' -benchtime 2s -cpu 1 ./gpu
echo
echo "== Python stage: unrelated calls while watched, cost per watched call vs a bare watchpoint, USDT function__return, an in-process span (bench/pywatch)"
go build -o bin/pywatch ./bench/pywatch
pinned ./bin/pywatch -rounds 7
echo
echo "== reading a batch of N Python requests from outside: batched (level by level, vectored reads) vs item by item (bench/pyread)"
go build -o bin/pyread ./bench/pyread
pinned ./bin/pyread -rounds 7
echo
echo "== the daemon's own CPU and memory while it traces several targets at once (bench/daemonload)"
go build -o bin/specprobe ./cmd/specprobe
go build -o bin/daemonload ./bench/daemonload
echo "-- 5 targets (3 native, 2 Python)"
$sudo ./bin/daemonload
echo "-- 16 native targets (the DaemonSet's max_processes)"
$sudo ./bin/daemonload -native 16 -py 0
} | tee "$log"
echo
echo "== summary: the measures of issue 14, from this run"
awk '
/^specprobe \/ empty program, after endbr64:/ { print "native probe cost per hit / empty BPF program:", $NF }
/^CUDA probe cost per launch:/ { print }
/^BenchmarkBuilder(OTel|OTLP)?[ \t-]/ { for (i = 1; i < NF; i++) if ($(i+1) == "events/s") printf "%s: %.2f M events/s\n", $1, $i / 1e6 }
/^-- [0-9]+ / { targets = $2 " targets" }
/^-- spans to / { sink = $4; sub(/,$/, "", sink) }
/^daemon CPU:/ { for (i = 1; i < NF; i++) if ($(i+1) == "us") print "daemon CPU per event, " targets ", " sink ":", $i, "us" }
/^daemon memory:/ { print "daemon peak RSS, " targets ", " sink ":", $5, "MiB" }
' "$log"
