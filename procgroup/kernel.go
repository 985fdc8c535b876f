package procgroup

import (
	"os"
	"strconv"

	"github.com/specprobe/specprobe/internal/procfs"
)

// maxScan bounds the processes read to find children: more than any node
// runs, fewer than a forged /proc could list.
const maxScan = 1 << 16

// Kernel is the Table of this machine's processes, read from /proc. The
// children of every process are found in one pass over /proc, the first
// time they are asked for.
type Kernel struct {
	children map[int][]int
}

// Proc reads one process: its parent, user and title.
func (k *Kernel) Proc(pid int) (Proc, bool) {
	if pid <= 0 || pid >= procfs.MaxPID {
		return Proc{}, false
	}
	st, err := procfs.ReadStat(pid)
	if err != nil || st.Kernel() || st.Zombie() {
		return Proc{}, false
	}
	status, err := procfs.ReadStatus(pid)
	if err != nil {
		return Proc{}, false
	}
	p := Proc{PID: pid, PPID: st.PPID, UID: status.UID, Exe: procfs.Exe(pid)}
	p.Title, p.Titled = TitleOf(pid)
	return p, true
}

// TitleOf reads pid's title from its command line.
func TitleOf(pid int) (Title, bool) {
	args, err := procfs.Cmdline(pid)
	if err != nil || len(args) == 0 {
		return Title{}, false
	}
	return ParseTitle(args[0])
}

// Children lists the processes whose parent is pid.
func (k *Kernel) Children(pid int) []int {
	if k.children == nil {
		k.children = map[int][]int{}
		entries, _ := os.ReadDir("/proc")
		for i, e := range entries {
			if i >= maxScan {
				break
			}
			c, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if st, err := procfs.ReadStat(c); err == nil && !st.Kernel() {
				k.children[st.PPID] = append(k.children[st.PPID], c)
			}
		}
	}
	return k.children[pid]
}
