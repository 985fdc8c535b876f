package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/specmetrics"
)

// scrape serves the daemon's /metrics with one target's steps recorded
// (a batched verify of two requests, a slow one among them) and returns
// what an OpenMetrics scrape (Prometheus with exemplars on) gets, and the
// metric families in it.
func scrape(t *testing.T) (string, map[string]bool) {
	t.Helper()
	d := demoDaemon(t)
	mp, reg, err := newMeter(d.Totals, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(t.Context())
	sm, err := specmetrics.New(mp.Meter("github.com/specprobe/specprobe"))
	if err != nil {
		t.Fatal(err)
	}
	target := sm.Target("demo", 42, attribute.String("k8s.pod.name", "llama-0"), attribute.String("k8s.namespace.name", "inference"))
	sink := spanbuilder.NewOTelSink(func([]*spanrec.Span) {}, nil, "test")
	sink.OnStep = target.Step
	t0 := time.Unix(1_700_000_000, 0)
	for i, dur := range []time.Duration{2 * time.Millisecond, 3 * time.Millisecond, 400 * time.Millisecond} {
		at := t0.Add(time.Duration(i) * time.Second)
		for _, rid := range []string{"a", "b"} {
			sink.Step(spanbuilder.Step{RequestID: rid, TID: 7, Start: at, End: at.Add(dur), Calls: []spanbuilder.Call{
				{Stage: "draft", TID: 7, Start: at, End: at.Add(time.Millisecond), EndBoot: uint64(2*i + 1), Values: []spanbuilder.Value{{Name: "num_drafts", V: 3}}},
				{Stage: "verify", TID: 7, Start: at, End: at.Add(dur), EndBoot: uint64(2*i + 2), Values: []spanbuilder.Value{{Name: "num_correct_drafts", V: 2}}},
			}})
		}
	}
	srv := httptest.NewServer(d.handler(reg, false))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	families := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)`).FindAllStringSubmatch(string(b), -1) {
		families[m[1]] = true
		switch m[2] {
		case "histogram":
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				families[m[1]+s] = true
			}
		case "counter":
			families[m[1]+"_total"] = true
		}
	}
	return string(b), families
}

// The speculative-decoding metrics on /metrics, per engine, process and
// pod, with the trace of a slow verify as the exemplar of its bucket.
func TestSpecMetricsOnPrometheus(t *testing.T) {
	body, families := scrape(t)
	labels := `k8s_namespace_name="inference",k8s_pod_name="llama-0",process_pid="42",specprobe_engine="demo"`
	// Three steps of a batched verify serving two requests, each accepting
	// 2 of 3 drafts: 6 verifies of a request, 3 calls. (OpenMetrics writes
	// counters as floats.)
	for _, want := range []string{
		`specprobe_spec_acceptance_length_bucket{` + labels + `,le="1.0"} 0`,
		`specprobe_spec_acceptance_length_bucket{` + labels + `,le="2.0"} 6`,
		`specprobe_spec_accepted_tokens_per_position_total{` + labels + `,specprobe_spec_position="1"} 6.0`,
		`specprobe_spec_accepted_tokens_per_position_total{` + labels + `,specprobe_spec_position="2"} 0.0`,
		`specprobe_spec_verifies_total{` + labels + `} 3.0`,
		`specprobe_spec_accepted_tokens_total{` + labels + `} 12.0`,
		`specprobe_spec_drafted_tokens_total{` + labels + `} 18.0`,
		`specprobe_spec_stage_duration_seconds_count{` + labels + `,specprobe_stage="verify"} 3`,
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `( #|$)`).MatchString(body) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	ex := regexp.MustCompile(`specprobe_spec_stage_duration_seconds_bucket\{[^}]*specprobe_stage="verify"[^}]*le="0.5"\} \d+ # \{[^}]*trace_id="[0-9a-f]{32}"[^}]*\} 0.4 `)
	if !ex.MatchString(body) {
		t.Errorf("no exemplar with the slow verify's trace on its bucket:\n%s", grep(body, "stage_duration"))
	}
	if !families["specprobe_spec_acceptance_length_bucket"] {
		t.Errorf("families %v", families)
	}
}

func grep(body, s string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
