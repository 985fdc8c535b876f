package tracer

import (
	"os"
	"strconv"
	"strings"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanschema"
)

// threadLabels describes the threads of one process for their spans: with
// the spec's thread_label, as SGLang's tracing does (it labels its
// scheduler thread "Scheduler" and gives it the tensor-parallel rank, and
// the data-parallel one when there is one); without, by their own names.
type threadLabels struct {
	pid        int
	fixed      string // the spec's thread_label
	host       string
	tp, pp, dp int
	names      map[uint32]string // thread names read so far
}

// newThreadLabels describes pid's threads; ranks are the process's, as its
// spec reads them from its title (probes.Match.RanksOf).
func newThreadLabels(pid int, spec *probes.Spec, ranks []probes.RankValue) *threadLabels {
	t := &threadLabels{pid: pid, fixed: spec.ThreadLabel, host: machineID(pid),
		tp: spanschema.NoRank, pp: spanschema.NoRank, dp: spanschema.NoRank, names: map[uint32]string{}}
	if t.fixed != "" {
		t.tp = 0 // SGLang's thread span always names a TP rank
	}
	for _, r := range ranks {
		switch r.Rank.Name {
		case "tp":
			t.tp = r.Value
		case "pp":
			t.pp = r.Value
		case "dp":
			t.dp = r.Value
		}
	}
	return t
}

// see reads the names of threads not seen yet, while they run: a step's
// spans are made when the step ends, which for a thread's last step may be
// after the thread has gone.
func (t *threadLabels) see(tids []uint32) {
	if t.fixed != "" {
		return
	}
	for _, tid := range tids {
		if _, ok := t.names[tid]; !ok {
			t.names[tid] = export.ThreadName(int64(t.pid), int64(tid))
		}
	}
}

// thread is the spanbuilder.OTelSink's Thread.
func (t *threadLabels) thread(pid, tid uint32) spanschema.Thread {
	th := spanschema.Thread{HostID: t.host, TID: int(tid), TP: t.tp, PP: t.pp, DP: t.dp}
	if t.fixed != "" {
		th.Label = t.fixed
		return th
	}
	t.see([]uint32{tid})
	th.Label = t.names[tid]
	return th
}

// machineID is the target's machine id as SGLang reads it (/etc/machine-id,
// the one the process sees, in its container if it is in one), then the
// host's; "unknown" when neither is a machine id. The target's file is the
// target's to write: only a short run of hex digits is taken.
func machineID(pid int) string {
	for _, path := range []string{"/proc/" + strconv.Itoa(pid) + "/root/etc/machine-id", "/etc/machine-id"} {
		if id, ok := readMachineID(path); ok {
			return id
		}
	}
	return "unknown"
}

func readMachineID(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var buf [65]byte
	n, _ := f.Read(buf[:])
	id := strings.TrimSpace(string(buf[:n]))
	return id, validMachineID(id)
}

// validMachineID: 32 lowercase hex digits (machine-id(5)), or a few more or
// less from other systems, never anything but hex.
func validMachineID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}
