package export_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/export"
)

type chromeEvent struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Pid  int64           `json:"pid"`
	Tid  int64           `json:"tid"`
	ID   string          `json:"id"`
	Args json.RawMessage `json:"args"`
}

func TestPerfetto(t *testing.T) {
	spans := recordContract(t)
	w := &bufCloser{}
	exp := viaSDK{export.NewPerfetto(w)}
	ctx := context.Background()
	// Two calls: dedup must work across export batches too.
	if err := exp.ExportSpans(ctx, spans[:5]); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(ctx, spans[5:]); err != nil {
		t.Fatal(err)
	}
	if len(w.data) != 0 {
		t.Fatal("nothing may be written before Shutdown")
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.closed {
		t.Error("writer not closed")
	}
	if err := exp.ExportSpans(ctx, spans); err == nil {
		t.Error("ExportSpans after Shutdown should fail")
	}

	var doc struct {
		TraceEvents     []chromeEvent `json:"traceEvents"`
		DisplayTimeUnit string        `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(w.data, &doc); err != nil {
		t.Fatalf("%v\n%s", err, w.data)
	}
	if doc.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit = %q", doc.DisplayTimeUnit)
	}

	threads := map[int64]bool{}
	stages := map[string][]chromeEvent{}
	var async []chromeEvent
	for _, e := range doc.TraceEvents {
		if e.Pid != 4242 {
			t.Errorf("pid = %d, want 4242 from process.pid: %+v", e.Pid, e)
		}
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				threads[e.Tid] = true
			}
		case "X":
			stages[e.Name] = append(stages[e.Name], e)
		case "b", "e":
			async = append(async, e)
		default:
			t.Errorf("unexpected phase %+v", e)
		}
	}
	if !threads[101] || !threads[102] || len(threads) != 2 {
		t.Errorf("thread_name metadata for %v, want 101 and 102", threads)
	}
	if len(stages["DRAFT"]) != 2 || len(stages["VERIFY"]) != 1 || len(stages["DRAFT_EXTEND"]) != 1 {
		t.Fatalf("slices per stage: DRAFT %d VERIFY %d DRAFT_EXTEND %d, want 2 1 1",
			len(stages["DRAFT"]), len(stages["VERIFY"]), len(stages["DRAFT_EXTEND"]))
	}

	v := stages["VERIFY"][0]
	if v.Tid != 102 || v.Ts != "1700000000126456.789" || v.Dur != "2500.000" {
		t.Errorf("verify tid/ts/dur = %d %s %s", v.Tid, v.Ts, v.Dur)
	}
	var vargs struct {
		Rids    []string         `json:"rids"`
		Correct map[string]int64 `json:"num_correct_drafts"`
		Error   *string          `json:"error"`
	}
	if err := json.Unmarshal(v.Args, &vargs); err != nil {
		t.Fatal(err)
	}
	slices.Sort(vargs.Rids)
	if !slices.Equal(vargs.Rids, []string{ridA, ridB}) || vargs.Correct[ridA] != 3 || vargs.Correct[ridB] != 1 || vargs.Error != nil {
		t.Errorf("verify args = %s", v.Args)
	}

	x := stages["DRAFT_EXTEND"][0]
	var xargs struct {
		Rids  []string `json:"rids"`
		Error string   `json:"error"`
	}
	if err := json.Unmarshal(x.Args, &xargs); err != nil {
		t.Fatal(err)
	}
	if xargs.Error != "cuda oom" || len(xargs.Rids) != 2 || x.Tid != 101 {
		t.Errorf("draft_extend = %+v args %s", x, x.Args)
	}

	// Per request, one id: the spans nested as they are, each closed after
	// its children, even where they end at the same time.
	ids := map[string][]string{}
	for _, e := range async {
		ids[e.ID] = append(ids[e.ID], e.Ph+":"+e.Name)
	}
	if len(ids) != 2 {
		t.Fatalf("async tracks = %v, want 2", ids)
	}
	thread := "Scheduler [TP 0] (host:feedc0de | pid:101)"
	for _, rid := range []string{ridA, ridB} {
		root := " Req " + rid[:8]
		want := []string{"b:" + root, "b:" + thread, "b:decode_forward", "b:decode_loop",
			"e:decode_loop", "e:decode_forward", "e:" + thread, "e:" + root}
		found := false
		for _, seq := range ids {
			found = found || slices.Equal(seq, want)
		}
		if !found {
			t.Errorf("no track %v in %v", want, ids)
		}
	}
}

// Thread tracks are named by the thread's name, read once when the thread
// is first seen; a thread whose name cannot be read keeps "thread N".
func TestPerfettoThreadNames(t *testing.T) {
	spans := recordContract(t)
	asked := map[[2]int64]int{}
	names := map[int64]string{101: "scheduler", 102: ""}
	w := &bufCloser{}
	exp := viaSDK{export.NewPerfettoNamed(w, func(pid, tid int64) string {
		asked[[2]int64{pid, tid}]++
		if names[tid] == "" {
			return fmt.Sprintf("thread %d", tid)
		}
		return names[tid]
	})}
	ctx := context.Background()
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || asked[[2]int64{4242, 101}] != 1 || asked[[2]int64{4242, 102}] != 1 {
		t.Errorf("names asked %v, want pid 4242 tids 101 and 102 once each", asked)
	}
	var doc struct {
		TraceEvents []chromeEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(w.data, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			var a struct{ Name string }
			if err := json.Unmarshal(e.Args, &a); err != nil {
				t.Fatal(err)
			}
			got[e.Tid] = a.Name
		}
	}
	if got[101] != "scheduler" || got[102] != "thread 102" || len(got) != 2 {
		t.Errorf("thread tracks %v", got)
	}
}

// The default names come from /proc: this test's own thread is one a
// process can always read.
func TestThreadName(t *testing.T) {
	pid, tid := int64(os.Getpid()), int64(unix.Gettid())
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if got, want := export.ThreadName(pid, tid), strings.TrimSpace(string(comm)); got != want || got == "" {
		t.Errorf("ThreadName = %q, want %q", got, want)
	}
	if got := export.ThreadName(pid, 1<<30); got != fmt.Sprintf("thread %d", 1<<30) {
		t.Errorf("a thread that does not exist is named %q", got)
	}
	if got := export.ThreadName(0, 5); got != "thread 5" {
		t.Errorf("no pid: %q", got)
	}
}
