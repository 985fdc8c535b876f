#!/usr/bin/env bash
# Fetches one kernel of the test matrix from Debian's packages and makes a QEMU guest of it:
# $SPECPROBE_VM_CACHE/NAME/{vmlinuz,initrd.gz,release}. Cached: a second call does nothing.
#
#   kernel.sh NAME      NAME: 5.10 (bullseye), 6.1 (bookworm), 6.12 (trixie),
#                       newest (trixie-backports: the newest kernel Debian ships)
#
# The generic kernel packages, not -cloud (those have no 9p). apt-get reads each suite's
# index into a folder of its own (signatures checked against debian-archive-keyring), so
# the machine's apt sources are neither read nor changed. The initramfs is busybox-static
# with guest-init as /init and the modules the 9p root needs, decompressed (busybox's
# insmod reads no .xz) and listed in load order (modinfo's depends).
set -euo pipefail
name=${1:?usage: kernel.sh 5.10|6.1|6.12|newest}
case $name in
5.10) suite=bullseye ;;
6.1) suite=bookworm ;;
6.12) suite=trixie ;;
newest) suite=trixie-backports ;;
*) echo "kernel.sh: unknown kernel $name (5.10, 6.1, 6.12, newest)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
cache=${SPECPROBE_VM_CACHE:-/var/cache/specprobe-vm}
out=$cache/$name
# A kernel is kept until guest-init changes.
stamp=$(sha256sum "$here/guest-init" "$0" | sha256sum | cut -c1-16)
if [ -f "$out/initrd.gz" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
for tool in apt-get dpkg-deb modinfo xz; do
	command -v $tool >/dev/null || { echo "kernel.sh: $tool not found (apt-get install busybox-static kmod xz-utils)" >&2; exit 1; }
done
busybox=/bin/busybox # busybox-static's: the initramfs has no libc
case $(ldd $busybox 2>&1) in *'not a dynamic'*) ;; *) false ;; esac ||
	{ echo "kernel.sh: $busybox is not static (apt-get install busybox-static)" >&2; exit 1; }

work=$cache/.work-$name
rm -rf "$work" && mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/x" "$work/initrd"
echo "deb http://deb.debian.org/debian $suite main" >"$work/sources.list"
apt=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o Dir::State::Lists="$work/lists" -o Dir::Cache="$work" -o Dir::State::status=/dev/null
	-o Debug::NoLocking=1 -o APT::Sandbox::User=root -qq)
apt-get "${apt[@]}" update
# linux-image-amd64 names the suite's current image; newer kernels split it into
# linux-binary-* (vmlinuz) and linux-modules-*, which the image then depends on.
image=$(apt-cache "${apt[@]}" depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -1)
[ -n "$image" ] || { echo "kernel.sh: $suite has no linux-image-amd64" >&2; exit 1; }
parts=$(apt-cache "${apt[@]}" depends "$image" | sed -n 's/^ *Depends: \(linux-\(binary\|modules\)-[0-9][^ ]*\)$/\1/p')
(cd "$work" && apt-get "${apt[@]}" download $image $parts)
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done

shopt -s nullglob
mods=("$work"/x/lib/modules/* "$work"/x/usr/lib/modules/*)
[ ${#mods[@]} = 1 ] || { echo "kernel.sh: $image has ${#mods[@]} module trees" >&2; exit 1; }
moddir=${mods[0]}
release=$(basename "$moddir")
vmlinuz=$work/x/boot/vmlinuz-$release
[ -f "$vmlinuz" ] || vmlinuz=$moddir/vmlinuz # linux-binary-*
[ -f "$vmlinuz" ] || { echo "kernel.sh: no vmlinuz in $image $parts" >&2; exit 1; }

# What the guest needs as modules (a kernel may build any of them in): virtio PCI, the
# 9p root, and overlayfs. Each is listed after what it depends on.
declare -A path seen
while read -r f; do
	m=$(basename "$f"); m=${m%.xz}; m=${m%.ko}
	path[$m]=$f
done < <(find "$moddir/kernel" -name '*.ko' -o -name '*.ko.xz')
order=()
visit() {
	local m=${1//-/_} dep
	[ -n "${seen[$m]:-}" ] && return
	seen[$m]=1
	[ -n "${path[$m]:-}" ] || return 0 # built in
	for dep in $(modinfo -F depends "${path[$m]}" | tr , ' '); do visit "$dep"; done
	order+=("$m")
}
for m in virtio_pci 9pnet_virtio 9p overlay; do visit $m; done
mkdir -p "$work/initrd"/{bin,proc,sys,dev,host,mods}
cp "$busybox" "$work/initrd/bin/busybox"
cp "$here/guest-init" "$work/initrd/init"
for m in "${order[@]}"; do
	case ${path[$m]} in
	*.xz) xz -dc "${path[$m]}" >"$work/initrd/mods/$m.ko" ;;
	*) cp "${path[$m]}" "$work/initrd/mods/$m.ko" ;;
	esac
	echo "$m" >>"$work/initrd/mods/order"
done
touch "$work/initrd/mods/order"
(cd "$work/initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd.gz")
rm -rf "$out" && mkdir -p "$out"
cp "$vmlinuz" "$out/vmlinuz"
mv "$work/initrd.gz" "$out/initrd.gz"
echo "$release" >"$out/release"
echo "$stamp" >"$out/stamp"
rm -rf "$work"
echo "kernel $name: $release ($image from $suite)"
