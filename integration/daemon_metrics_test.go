package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/specprobe/specprobe/daemon"
	"github.com/specprobe/specprobe/probes"
)

// TestDaemonSpecMetrics scrapes a running daemon's /metrics after it traced
// the demo target: the speculative-decoding series of that process say
// exactly what its own log says (verifies, verifies of a request, drafts
// accepted), and the latency histogram carries a step's trace as exemplar.
func TestDaemonSpecMetrics(t *testing.T) {
	needRoot(t)
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	listening := make(chan string, 1)
	events := make(chan daemon.Event, 64)
	d, err := daemon.New(daemon.Options{Config: cfg, Specs: []*probes.Spec{demoSpec(t)}, Log: testLog{t},
		Listening: func(a string) { listening <- a }, Notify: func(e daemon.Event) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	addr := <-listening

	dm := startDemo(t, demoBinary(t, "specdemo-cet"), "--threads", "2", "--batch", "3", "--requests", "24")
	pid := dm.cmd.Process.Pid
	wait := func(kind string) {
		for deadline := time.After(20 * time.Second); ; {
			select {
			case e := <-events:
				if e.PID == pid && e.Kind == kind {
					return
				}
			case <-deadline:
				t.Fatalf("PID %d: not %s", pid, kind)
			}
		}
	}
	wait("attached")
	dm.release(t)
	waitExit(t, dm, 0)
	wait("detached")

	var verifies, accepts, accepted int
	for _, c := range readTruth(t, dm.log) {
		switch c.Stage {
		case "verify":
			verifies++
		case "accept":
			accepts += len(c.RIDs)
			accepted += len(c.RIDs) * int(*c.Correct)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	value := func(metric, labels string) float64 {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^%s\{process_pid="%d",specprobe_engine="demo"%s\} (\S+)`, metric, pid, labels))
		m := re.FindSubmatch(body)
		if m == nil {
			t.Errorf("/metrics has no %s of PID %d", metric, pid)
			return -1
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	t.Logf("truth: %d verifies, %d verifies of a request, %d drafts accepted", verifies, accepts, accepted)
	for _, c := range []struct {
		metric, labels string
		want           int
	}{
		{"specprobe_spec_verifies_total", "", verifies},
		{"specprobe_spec_acceptance_length_count", "", accepts},
		{"specprobe_spec_accepted_tokens_total", "", accepted},
		{"specprobe_spec_stage_duration_seconds_count", `,specprobe_stage="verify"`, verifies},
	} {
		if got := value(c.metric, c.labels); got != float64(c.want) {
			t.Errorf("%s%s = %v, want %d", c.metric, c.labels, got, c.want)
		}
	}
	if !regexp.MustCompile(fmt.Sprintf(`specprobe_spec_stage_duration_seconds_bucket\{process_pid="%d",[^}]*\} \d+ # \{[^}]*trace_id="[0-9a-f]{32}"`, pid)).Match(body) {
		t.Error("no exemplar on the stage durations")
	}
}
