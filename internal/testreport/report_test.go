package testreport

import (
	"bytes"
	"strings"
	"testing"
)

func ev(action, test, output string) Event {
	return Event{Action: action, Package: "p", Test: test, Output: output}
}

// A run on a host where watchpoints do not fire: a native test passes, a
// Python test skips on each interpreter.
var noFire = []Event{
	ev("run", "TestNative", ""),
	ev("pass", "TestNative", ""),
	ev("run", "TestPy", ""),
	ev("output", "TestPy/3.12", "    harness_test.go:41: "+NoWatchpoints+": hardware watchpoints never fire\n"),
	ev("output", "TestPy/3.12", "--- SKIP: TestPy/3.12 (0.00s)\n"),
	ev("skip", "TestPy/3.12", ""),
	ev("output", "TestPy/trixie-3.13", "    x_test.go:9: interpreter not installed\n"),
	ev("skip", "TestPy/trixie-3.13", ""),
	ev("pass", "TestPy", ""),
}

// A guest where they fire.
var fired = []Event{
	ev("pass", "TestNative", ""),
	ev("pass", "TestPy/3.12", ""),
	ev("pass", "TestPy/trixie-3.13", ""),
	ev("pass", "TestPy", ""),
}

func TestResults(t *testing.T) {
	got := Results(noFire)
	want := []Result{
		{"p", "TestNative", "pass", ""},
		{"p", "TestPy/3.12", "skip", NoWatchpoints + ": hardware watchpoints never fire"},
		{"p", "TestPy/trixie-3.13", "skip", "interpreter not installed"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// A package that did not build failed, with no test in it.
	got = Results([]Event{{Action: "output", Package: "q", Output: "# q\n"}, {Action: "fail", Package: "q"}})
	if len(got) != 1 || got[0].Action != "fail" || got[0].Package != "q" {
		t.Errorf("a package's own failure was lost: %+v", got)
	}
	// A parent that fails with no failing subtest (a Fatal after them) is a failure.
	got = Results([]Event{ev("pass", "T/3.12", ""), ev("fail", "T", "")})
	if len(got) != 2 || got[1].Action != "fail" {
		t.Errorf("a parent's own failure was lost: %+v", got)
	}
	// A test binary that timed out mid-test: test2json writes no outcome
	// for the test or its package; the test running then failed.
	got = Results([]Event{ev("run", "A", ""), ev("run", "A/3.11", ""), ev("pass", "A/3.11", ""), ev("run", "A/3.12", ""),
		ev("output", "A/3.12", "panic: test timed out after 45m0s\n"), ev("output", "A/3.12", "BrokenPipeError\n")})
	if len(got) != 2 || got[1].Test != "A/3.12" || got[1].Action != "fail" || got[1].Reason != "panic: test timed out after 45m0s" {
		t.Errorf("a test cut short by a timeout was not failed: %+v", got)
	}
}

func TestInterp(t *testing.T) {
	for test, want := range map[string]string{
		"TestSGLangTarget/3.10":               "3.10",
		"TestSpecReplay/trixie-3.13/sglang":   "trixie-3.13",
		"TestExact/batch=64/debian-3.11":      "debian-3.11",
		"TestDemoMatchesGroundTruth/specdemo": "native",
		"TestX/3.120":                         "native",
	} {
		if got := Interp(test); got != want {
			t.Errorf("Interp(%q) = %q, want %q", test, got, want)
		}
	}
}

func TestVerdict(t *testing.T) {
	host := func(evs []Event) *Place { return &Place{Name: "host", Events: evs} }
	guest := func(evs []Event) *Place { return &Place{Name: "6.1", Guest: true, Events: evs} }
	failing := append(append([]Event{}, fired...), ev("fail", "TestOther", ""))
	for _, c := range []struct {
		name   string
		places []*Place
		want   []string // each a part of one complaint; none: passes
	}{
		{"host fires", []*Place{host(fired)}, nil},
		{"only a guest fires", []*Place{host(noFire), guest(fired)}, nil},
		{"nowhere fires", []*Place{host(noFire)}, []string{"no place ran the Python tests"}},
		{"a guest that does not fire", []*Place{host(fired), guest(noFire)}, []string{"6.1: 1 test(s) skipped because watchpoints did not fire"}},
		{"a failure", []*Place{host(failing)}, []string{"host: 1 test(s) failed"}},
		{"a guest with no results", []*Place{host(fired), guest(nil)}, []string{"6.1: no test results"}},
		{"a smoke guest that ran only native tests", []*Place{host(fired), {Name: "7.3", Guest: true, Suite: "smoke", Events: noFire[:2]}},
			[]string{"7.3: no Python test ran, where its smoke suite"}},
		{"a guest run by hand of native tests", []*Place{host(fired), {Name: "6.1", Guest: true, Suite: "run TestNative", Events: noFire[:2]}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "nowhere fires" && len(Verdict(c.places, false)) != 0 {
				t.Errorf("a run by hand (-any) failed for want of Python tests")
			}
			got := Verdict(c.places, true)
			if len(got) != len(c.want) {
				t.Fatalf("got %q, want %d complaint(s) %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("complaint %q does not say %q", got[i], w)
				}
			}
		})
	}
}

func TestLines(t *testing.T) {
	lines := Lines(&Place{Name: "host", Kernel: "6.18", Events: noFire})
	if len(lines) != 3 || lines[0].Interp != "native" || lines[1].Interp != "3.12" || lines[2].Interp != "trixie-3.13" {
		t.Fatalf("lines %+v", lines)
	}
	if s := lines[1].String(); !strings.Contains(s, "0 passed, 0 failed, 1 skipped (1: "+NoWatchpoints+")") {
		t.Errorf("line %q", s)
	}
}

func TestStream(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA/3.12","Output":"    a_test.go:3: kept\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA/3.12"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:5: why it failed\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB/3.13"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`# p [build failed]`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
	}, "\n")
	var save, show bytes.Buffer
	if err := Stream(strings.NewReader(in), &save, &show, true); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(save.String(), "\n"); n != 8 {
		t.Errorf("saved %d events, want 8", n)
	}
	want := "--- PASS: TestA (0.0s)\n    b_test.go:5: why it failed\n# p [build failed]\nFAIL\tp\t0.1s\n"
	if show.String() != want {
		t.Errorf("shown:\n%s\nwant:\n%s", show.String(), want)
	}
}
