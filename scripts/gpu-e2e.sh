#!/usr/bin/env bash
# The GPU check: a PyTorch speculative loop (pytargets/torch_spec_loop.py) on
# CUDA, synced and overlapped, traced by specprobe; checks the spans against
# the loop's own log (calls, request ids, accepted counts), the CUDA wait and
# launch attributes against its host-clock measurements, the GPU fields'
# windows, and prints the costs (step time untraced / traced without NVML /
# traced with NVML, interleaved). Needs root, no Go, no network.
#
#   scripts/gpu-e2e.sh [--dry-run] SPECPROBE OUTDIR
#
# --dry-run: the target's CPU stand-in for CUDA (no torch needed), short runs.
# Full logs and spans go under OUTDIR; a compact summary goes to stdout.
set -uo pipefail
DRY=""
if [[ "${1:-}" == "--dry-run" ]]; then DRY=--dry-run; shift; fi
if [[ $# -ne 2 ]]; then echo "usage: $0 [--dry-run] SPECPROBE OUTDIR" >&2; exit 2; fi
SP=$(readlink -f "$1"); OUT=$(readlink -m "$2")
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(dirname "$HERE")
mkdir -p "$OUT"
PY=${PYTHON:-}
for c in /opt/torch/.venv/bin/python /root/.pyenv/versions/3.12.1/bin/python python3; do
	[[ -z "$PY" ]] && command -v "$c" >/dev/null && PY=$c
done
SECS=${SECS:-10}; CHECK_SECS=${CHECK_SECS:-8}; ROUNDS=${ROUNDS:-3}
[[ -n "$DRY" ]] && SECS=${SECS_DRY:-2} && CHECK_SECS=${SECS_DRY:-2} && ROUNDS=1
TARGET=("$PY" "$ROOT/pytargets/torch_spec_loop.py" $DRY)
SPEC=$HERE/gpu-e2e/torch_spec_loop.yaml
echo "gpu-e2e: $SP, python $PY, out $OUT ${DRY:+(dry run)}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu-e2e: /'

# run NAME SECONDS MODE [specprobe flags...]: the target waits for SIGUSR1
# until specprobe has attached (none given: untraced); prints its median step.
run() {
	local name=$1 secs=$2 mode=$3; shift 3
	"${TARGET[@]}" --mode "$mode" --seconds "$secs" --wait-signal --log "$OUT/$name.log.jsonl" >"$OUT/$name.target.txt" 2>&1 &
	local tp=$! pid="" i
	for i in $(seq 600); do
		pid=$(sed -n 's/^ready pid=//p' "$OUT/$name.target.txt"); [[ -n "$pid" ]] && break
		kill -0 $tp 2>/dev/null || break; sleep 0.1
	done
	if [[ -z "$pid" ]]; then echo "gpu-e2e: $name: target did not start"; cat "$OUT/$name.target.txt"; return 1; fi
	local sp=""
	if [[ $# -gt 0 ]]; then
		"$SP" attach --pid "$pid" --probes "$SPEC" "$@" >"$OUT/$name.attach.txt" 2>&1 &
		sp=$!
		for i in $(seq 600); do
			grep -q "attached to PID" "$OUT/$name.attach.txt" && break
			kill -0 $sp 2>/dev/null || break; sleep 0.1
		done
		if ! grep -q "attached to PID" "$OUT/$name.attach.txt"; then
			echo "gpu-e2e: $name: specprobe did not attach"; tail -5 "$OUT/$name.attach.txt"; kill $tp; return 1
		fi
	fi
	kill -USR1 "$pid"
	wait $tp
	[[ -n "$sp" ]] && wait $sp
	sed -n 's/^steps [0-9]* median \([0-9.]*\) ms p99 \([0-9.]*\) ms.*/\1 \2/p' "$OUT/$name.target.txt"
}

rc=0
for mode in synced overlapped; do
	run "$mode" "$CHECK_SECS" "$mode" --exporter "otlp-file=$OUT/$mode.spans.jsonl" --exporter "perfetto=$OUT/$mode.perfetto.json" >/dev/null || rc=1
	"$PY" "$HERE/gpu-e2e/check.py" spans "$mode" "$OUT/$mode.log.jsonl" "$OUT/$mode.spans.jsonl" "$OUT/$mode.attach.txt" | tee "$OUT/$mode.check.txt"
	[[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
done

: >"$OUT/costs.tsv"
for r in $(seq "$ROUNDS"); do
	for kind in untraced traced-no-nvml traced-nvml; do
		case $kind in
		untraced) flags=() ;;
		traced-no-nvml) flags=(--no-gpu --exporter "otlp-file=$OUT/cost-$r-$kind.spans.jsonl") ;;
		traced-nvml) flags=(--exporter "otlp-file=$OUT/cost-$r-$kind.spans.jsonl") ;;
		esac
		ms=$(run "cost-$r-$kind" "$SECS" synced "${flags[@]}") || rc=1
		echo "$r $kind ${ms:-nan nan}" >>"$OUT/costs.tsv"
	done
done
"$PY" "$HERE/gpu-e2e/check.py" costs "$OUT/costs.tsv" | tee "$OUT/costs.check.txt"
[[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
grep -h "NVML cost:" "$OUT"/cost-*-traced-nvml.attach.txt | sed 's/^/gpu-e2e: /'
echo "gpu-e2e: $([[ $rc -eq 0 ]] && echo PASS || echo FAIL); full logs in $OUT"
exit $rc
