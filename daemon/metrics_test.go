package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// demoDaemon is a daemon with the demo spec, not running.
func demoDaemon(t *testing.T) *Daemon {
	t.Helper()
	spec, err := probes.Lookup("demo")
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Config: Defaults(), Specs: []*probes.Spec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestEndpoints(t *testing.T) {
	d := demoDaemon(t)
	d.totals = Totals{Attaches: 3, Detaches: 2, Events: 1000, Rejected: map[string]uint64{reasonBadELF: 2, reasonDeadline: 1}}
	d.targets[42] = &target{progress: tracer.Progress{Events: 500, Drops: 7, Export: []tracer.ExportStats{{Name: "otlp", Dropped: 40, Shed: 30}}},
		costPerEvent: uprobeEventCost, attachedAt: time.Now()}
	mp, reg, err := newMeter(d.Totals, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(t.Context())
	srv := httptest.NewServer(d.handler(reg, true))
	defer srv.Close()
	public := httptest.NewServer(d.handler(reg, false))
	defer public.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the first scan: %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz with the loop never run: %d", code)
	}
	d.ready.Store(true)
	d.touch()
	for _, p := range []string{"/readyz", "/healthz"} {
		if code, body := get(p); code != http.StatusOK {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		"specprobe_daemon_processes 1",
		"specprobe_daemon_attaches_total 3",
		"specprobe_daemon_detaches_total 2",
		"specprobe_events_total 1500",
		"specprobe_drops_kernel_total 7",
		"specprobe_sampling_rate 1",
		"specprobe_probe_cost_seconds_total 0.0006", // 500 uprobe events x 1.2 us
		"specprobe_daemon_memory_rss_bytes ",
		"specprobe_spans_dropped_total 40",
		"specprobe_spans_dropped_memory_total 30",
		"specprobe_daemon_queued_bytes 0",
		"specprobe_daemon_memory_heap_live_bytes ",
		`specprobe_daemon_rejected_total{reason="bad_elf"} 2`,
		`specprobe_daemon_rejected_total{reason="deadline"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if code, body := get("/targets"); code != http.StatusOK || !strings.Contains(body, `"events": 500`) ||
		!strings.Contains(body, `"spans_dropped": 40`) || !strings.Contains(body, `"spans_dropped_memory": 30`) {
		t.Errorf("/targets: %d %s", code, body)
	}
	// The listener facing the pod network serves the rest, not /targets.
	for path, want := range map[string]int{"/metrics": 200, "/healthz": 200, "/readyz": 200, "/targets": 404} {
		resp, err := http.Get(public.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("metrics_listen %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// Past maxAnswering requests at once the others get 503, and a slot is
// free again once a request is answered.
func TestFewAtOnce(t *testing.T) {
	busy := make(chan struct{}, 2)
	release := make(chan struct{})
	entered := make(chan struct{})
	h := fewAtOnce(busy, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	done := make(chan int)
	serve := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		done <- w.Code
	}
	go serve()
	go serve()
	<-entered
	<-entered // both slots held
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Errorf("a third request at once: %d, Retry-After %q; want 503, 1", w.Code, w.Header().Get("Retry-After"))
	}
	release <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Errorf("first request: %d", code)
	}
	go serve()
	<-entered // the freed slot serves the next one
	close(release)
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("request: %d", code)
		}
	}
}
