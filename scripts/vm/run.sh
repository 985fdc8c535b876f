#!/usr/bin/env bash
# Boots one kernel of the test matrix (scripts/vm/kernel.sh NAME makes it) under QEMU and runs
# SCRIPT in it as root; exits with the script's status, or 125 when the guest ended without
# one (a panic, or VM_TIMEOUT seconds passed: default 3000).
#
#   run.sh NAME SCRIPT
#
# TCG, not KVM: QEMU emulates the x86 debug registers, so hardware watchpoints fire in the
# guest where this machine's hypervisor never delivers them. The guest's root is the host's,
# shared read-write over 9p, so SCRIPT, the checkout and the test interpreters are at the same
# paths as here; /tmp, /run and /proc are the guest's own. VM_MEM sets its memory in MiB
# (default 4096), VM_CPUS its processors (default: this machine's, at most 4). VM_KEEP names a
# host directory the guest sees at its path even under its own /tmp or /run (the checkout).
set -euo pipefail
name=${1:?usage: run.sh KERNEL SCRIPT}
script=$(realpath "${2:?usage: run.sh KERNEL SCRIPT}")
here=$(cd "$(dirname "$0")" && pwd)
"$here/kernel.sh" "$name"
k=${SPECPROBE_VM_CACHE:-/var/cache/specprobe-vm}/$name
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "run.sh: qemu-system-x86_64 not found (apt-get install qemu-system-x86)" >&2; exit 1; }
cpus=${VM_CPUS:-$(nproc)}
[ "$cpus" -le 4 ] || cpus=4
rm -f "$script.rc"
# random.trust_cpu: Go's crypto/rand would otherwise wait for the entropy pool of an idle
# guest. -no-reboot and panic=-1: a panic ends QEMU instead of looping. loglevel=1: the
# console carries the script's output, not 9p's cache notices.
status=0
timeout "${VM_TIMEOUT:-3000}" qemu-system-x86_64 -machine q35 -accel tcg,thread=multi \
	-smp "$cpus" -m "${VM_MEM:-4096}" -cpu "${VM_CPU:-max}" -display none -vga none -serial stdio -monitor none -no-reboot -nic none \
	-kernel "$k/vmlinuz" -initrd "$k/initrd.gz" \
	-append "console=ttyS0 quiet loglevel=1 panic=-1 random.trust_cpu=on vmcmd=$script${VM_KEEP:+ vmkeep=$VM_KEEP}" \
	-fsdev local,id=fs0,path=/,security_model=none,multidevs=remap \
	-device virtio-9p-pci,fsdev=fs0,mount_tag=hostroot </dev/null || status=$?
if [ ! -f "$script.rc" ]; then
	echo "run.sh: the $name guest ended without the script's status (QEMU: $status)" >&2
	exit 125
fi
exit "$(cat "$script.rc")"
