#!/usr/bin/env bash
# Debian trixie's CPython 3.13, as production runs it, for the tests: a minimal trixie chroot
# (debootstrap) and a launcher that runs its python3.13 in it, at the path
# internal/testinterp names. Tests that find no launcher skip that interpreter, saying so.
#
# The launcher execs all the way down (unshare, sh, chroot, sh, python3.13), so the PID a
# test starts is the interpreter's, and the target specprobe attaches to is a process whose
# root is the chroot, as in a container. In a private mount namespace it binds every host
# top-level directory the chroot does not own (all but /bin, /boot, /dev, /etc, /lib*, /proc,
# /run, /sbin, /sys, /usr, /var), so a checkout anywhere (CI clones into /check), the test's
# working directory, its scripts and their logs resolve as they do outside, and mounts a
# /proc. A working directory it cannot enter is an error, not a silent run from /.
#
# Needs root and debootstrap (apt-get install debootstrap); about 45 s and 260 MB the first
# time, nothing after.
set -euo pipefail
dir=${SPECPROBE_TRIXIE:-/var/lib/specprobe-test}
root=$dir/trixie
launcher=$dir/trixie-python3.13
if [ ! -x "$root/usr/bin/python3.13" ]; then
	rm -rf "$root.tmp"
	mkdir -p "$dir"
	debootstrap --variant=minbase --include=python3.13 trixie "$root.tmp" \
		http://deb.debian.org/debian >"$dir/debootstrap.log" 2>&1 ||
		{ tail -20 "$dir/debootstrap.log" >&2; exit 1; }
	rm -rf "$root"
	mv "$root.tmp" "$root"
fi
cat >"$launcher.tmp" <<EOF
#!/bin/sh
# Runs Debian trixie's python3.13 in $root (scripts/trixie-python.sh wrote this).
exec unshare --mount --propagation private /bin/sh -c '
r=\$1; shift
for d in /*; do
	case \$d in /bin|/boot|/dev|/etc|/lib|/lib32|/lib64|/libx32|/proc|/run|/sbin|/sys|/usr|/var) continue ;; esac
	[ -d "\$d" ] && [ ! -L "\$d" ] || continue
	mkdir -p "\$r\$d" && mount --rbind "\$d" "\$r\$d" || exit 126
done
mount -t proc proc "\$r/proc" || exit 126
exec chroot "\$r" /bin/sh -c "cd \\"\\\$0\\" || exit 126; exec /usr/bin/python3.13 \\"\\\$@\\"" "\$PWD" "\$@"
' sh "$root" "\$@"
EOF
chmod 755 "$launcher.tmp"
mv "$launcher.tmp" "$launcher"
echo "$launcher: $("$launcher" -c 'import sys; print(sys.version.split()[0])')"
