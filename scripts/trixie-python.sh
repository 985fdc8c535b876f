#!/usr/bin/env bash
# Debian trixie's CPython 3.13, as production runs it, for the tests: a minimal trixie chroot
# (debootstrap) and a launcher that runs its python3.13 in it, at the path
# internal/testinterp names. Tests that find no launcher skip that interpreter, saying so.
#
# The launcher execs all the way down (unshare, sh, chroot, sh, python3.13), so the PID a
# test starts is the interpreter's, and the target specprobe attaches to is a process whose
# root is the chroot, as in a container. In a private mount namespace it binds the host's
# /tmp, /root, /work, /home and /srv at the same paths inside, so the test scripts, their
# logs and the test's working directory resolve as they do outside, and mounts a /proc.
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
for d in /tmp /root /work /home /srv; do
	[ -d "\$d" ] && mkdir -p "\$r\$d" && mount --rbind "\$d" "\$r\$d"
done
mount -t proc proc "\$r/proc"
exec chroot "\$r" /bin/sh -c "cd \\"\\\$0\\" 2>/dev/null; exec /usr/bin/python3.13 \\"\\\$@\\"" "\$PWD" "\$@"
' sh "$root" "\$@"
EOF
chmod 755 "$launcher.tmp"
mv "$launcher.tmp" "$launcher"
echo "$launcher: $("$launcher" -c 'import sys; print(sys.version.split()[0])')"
