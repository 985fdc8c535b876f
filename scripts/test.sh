#!/usr/bin/env bash
# make test, after vet: every package's tests on this machine, then the kernel matrix in QEMU
# guests (scripts/vmtest.sh), then one line per place and interpreter saying what ran and
# what was skipped (cmd/testreport). Fails when a test failed anywhere, when a guest's Python
# tests skipped, or when the Python tests ran nowhere: a skipped test is not a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
out=out/test
rm -rf "$out"
mkdir -p "$out/host" "$out/bin"
export CGO_CFLAGS=${CGO_CFLAGS:-"-O2 -g -Wno-deprecated-declarations"}
go build -o "$out/bin/testreport" ./cmd/testreport || exit 1
printf '{"Name":"host","Kernel":"%s","Guest":false,"Suite":"every package"}\n' "$(uname -r)" >"$out/host/place.json"

echo "== this machine ($(uname -r)): every package"
go test -json -count=1 -p 1 -timeout 30m ./... 2>&1 | "$out/bin/testreport" stream "$out/host/go.json"
host=${PIPESTATUS[0]}

scripts/vmtest.sh
vm=$?

places=()
for d in "$out"/*/; do
	[ -f "$d/place.json" ] && places+=("${d%/}")
done
"$out/bin/testreport" summary "${places[@]}"
summary=$?
[ "$host" = 0 ] && [ "$vm" = 0 ] && [ "$summary" = 0 ]
