#!/usr/bin/env bash
# Start the demo target, attach specprobe, let the target serve its requests,
# and leave the traces in OUT: spans.jsonl (OTLP JSON), trace.json (Perfetto),
# truth.jsonl (the target's own log of every stage call).
set -euo pipefail
out=${1:-out}
mkdir -p "$out"
rm -f "$out"/attach.log "$out"/demo.stdout "$out"/console.txt "$out"/spans.jsonl "$out"/trace.json "$out"/truth.jsonl
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"

./demo/specdemo-cet --wait-signal --threads 2 --batch 3 --requests 300 --log "$out/truth.jsonl" >"$out/demo.stdout" 2>"$out/demo.stderr" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT
# The target prints its pid once its workers are parked on SIGUSR1.
until grep -q '^ready' "$out/demo.stdout" 2>/dev/null; do
	kill -0 $demo 2>/dev/null || { echo "demo target died"; cat "$out/demo.stderr"; exit 1; }
	sleep 0.05
done

echo "== specprobe attach --pid $demo (demo target: 2 threads, 300 requests)"
$sudo ./bin/specprobe attach --pid "$demo" --exporter otlp-file="$out/spans.jsonl" \
	--exporter perfetto="$out/trace.json" --exporter console >"$out/console.txt" 2> >(tee "$out/attach.log" >&2) &
tracer=$!
until grep -q 'attached to PID' "$out/attach.log" 2>/dev/null; do
	kill -0 $tracer 2>/dev/null || { echo "specprobe failed to attach"; exit 1; }
	sleep 0.05
done
kill -USR1 $demo
wait $tracer
wait $demo || true
echo
echo "== demo target's own count: $(cat "$out/demo.stderr")"
echo "== the first stage spans (console exporter, in time order; all of them in $out/console.txt):"
sort "$out/console.txt" | sed -n 1,12p
echo "== wrote $out/spans.jsonl (OTLP JSON lines), $out/trace.json (open in ui.perfetto.dev), $out/truth.jsonl"
