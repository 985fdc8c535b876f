package procgroup

import (
	"slices"
	"testing"
)

func TestParseTitle(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // Title.String(); "" when not a title
		tp   int
		dp   int
	}{
		{"VLLM::Worker_TP0", "VLLM::Worker_TP0", 0, NoRank},
		{"VLLM::Worker_DP1_PP0_TP1_EP3", "VLLM::Worker_DP1_PP0_TP1_EP3", 1, 1},
		{"VLLM::EngineCore", "VLLM::EngineCore", NoRank, NoRank},
		{"VLLM::EngineCore_DP2", "VLLM::EngineCore_DP2", NoRank, 2},
		{"VLLM::Worker", "VLLM::Worker", NoRank, NoRank},
		{"sglang::scheduler_TP3", "sglang::scheduler_TP3", 3, NoRank},
		{"sglang::data_parallel_controller", "sglang::data_parallel_controller", NoRank, NoRank},
		// exec -a: the title is argv[0], the script and its arguments follow.
		{"VLLM::Worker_TP1\x00run_vllm.py\x00--tp-worker", "VLLM::Worker_TP1", 1, NoRank},
		// setproctitle pads with spaces on some systems.
		{"VLLM::EngineCore   ", "VLLM::EngineCore", NoRank, NoRank},
		{"python3", "", NoRank, NoRank},
		{"/usr/bin/python3", "", NoRank, NoRank},
		{"::Worker", "", NoRank, NoRank},
		{"VLLM::", "", NoRank, NoRank},
		{"a::b::c", "", NoRank, NoRank},
		{"VLLM::Worker_TP99999999", "VLLM::Worker_TP99999999", NoRank, NoRank}, // too many digits: part of the name
		{"VLLM::TP0", "VLLM::TP0", NoRank, NoRank},                             // a name, not a rank
	} {
		got, ok := ParseTitle(c.in)
		if ok != (c.want != "") || got.String() != c.want {
			t.Errorf("ParseTitle(%q) = %q, %v; want %q", c.in, got.String(), ok, c.want)
			continue
		}
		if got.Rank("TP") != c.tp || got.Rank("DP") != c.dp {
			t.Errorf("ParseTitle(%q): TP %d DP %d, want %d %d", c.in, got.Rank("TP"), got.Rank("DP"), c.tp, c.dp)
		}
	}
	if tt, _ := ParseTitle("VLLM::Worker_TP99999999"); tt.Name != "Worker_TP99999999" {
		t.Errorf("name %q", tt.Name)
	}
}

func FuzzParseTitle(f *testing.F) {
	for _, s := range []string{"VLLM::Worker_DP1_TP0", "sglang::scheduler_TP1", "a::b_C1_", "x::_TP0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tt, ok := ParseTitle(s)
		if !ok {
			return
		}
		again, ok2 := ParseTitle(tt.String())
		if !ok2 || again.String() != tt.String() {
			t.Fatalf("%q parsed as %q, which parses as %q (%v)", s, tt.String(), again.String(), ok2)
		}
	})
}

// table is a process tree written by hand.
type table map[int]Proc

func (t table) Proc(pid int) (Proc, bool) { p, ok := t[pid]; return p, ok }
func (t table) Children(pid int) []int {
	var out []int
	for _, p := range t {
		if p.PPID == pid && p.PID != pid {
			out = append(out, p.PID)
		}
	}
	slices.Sort(out)
	return out
}

func proc(pid, ppid int, title string) Proc {
	p := Proc{PID: pid, PPID: ppid, UID: 1000, Exe: "/usr/bin/python3"}
	if title == "/sbin/init" || title == "bash" {
		p.Exe = "/bin/" + title
	}
	p.Title, p.Titled = ParseTitle(title)
	return p
}

func tree(ps ...Proc) table {
	t := table{}
	for _, p := range ps {
		t[p.PID] = p
	}
	return t
}

func pids(ps []Proc) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.PID)
	}
	return out
}

// vllmTP2 is vllm serve with TP=2: the API server (untitled), EngineCore,
// two workers and multiprocessing's resource tracker.
func vllmTP2() table {
	return tree(
		proc(1, 0, "/sbin/init"),
		proc(100, 1, "/usr/bin/python3"),
		proc(110, 100, "VLLM::EngineCore"),
		proc(111, 110, "VLLM::Worker_TP0"),
		proc(112, 110, "VLLM::Worker_TP1"),
		proc(113, 110, "/usr/bin/python3"),
	)
}

func TestFindAndPlace(t *testing.T) {
	verify := []string{"Worker", "EngineCore"}
	accept := []string{"EngineCore"}
	dp2 := tree(
		proc(1, 0, "/sbin/init"),
		proc(100, 1, "VLLM::APIServer"),
		proc(110, 100, "VLLM::EngineCore_DP0"),
		proc(120, 100, "VLLM::EngineCore_DP1"),
		proc(111, 110, "VLLM::Worker_DP0_TP0_EP0"),
		proc(112, 110, "VLLM::Worker_DP0_TP1_EP1"),
		proc(121, 120, "VLLM::Worker_DP1_TP1_EP3"),
		proc(122, 120, "VLLM::Worker_DP1_TP0_EP2"),
	)
	// SGLang's DP attention: the DP groups' TP ranks run on, the lead of DP
	// group 1 is TP 2.
	sglangDPAttn := tree(
		proc(1, 0, "/sbin/init"),
		proc(200, 1, "/usr/bin/python3"),
		proc(201, 200, "sglang::scheduler_DP0_TP0"),
		proc(202, 200, "sglang::scheduler_DP0_TP1"),
		proc(203, 200, "sglang::scheduler_DP1_TP2"),
		proc(204, 200, "sglang::scheduler_DP1_TP3"),
		proc(205, 200, "sglang::detokenizer"),
	)
	oneGPU := tree(proc(100, 1, "/usr/bin/python3"), proc(110, 100, "VLLM::EngineCore"))
	untitled := tree(proc(300, 1, "python3"), proc(301, 300, "python3"))
	otherUser := vllmTP2()
	w1 := otherUser[112]
	w1.UID = 0
	otherUser[112] = w1
	for _, c := range []struct {
		name           string
		t              table
		pid            int
		server         []int
		verify, accept []int
	}{
		{"tp2 from EngineCore", vllmTP2(), 110, []int{100, 110, 111, 112, 113}, []int{111}, []int{110}},
		{"tp2 from rank 1", vllmTP2(), 112, []int{100, 110, 111, 112, 113}, []int{111}, []int{110}},
		{"tp2 from the API server", vllmTP2(), 100, []int{100, 110, 111, 112, 113}, []int{111}, []int{110}},
		{"one GPU", oneGPU, 110, []int{100, 110}, []int{110}, []int{110}},
		{"dp2 from a DP1 worker", dp2, 121, []int{100, 120, 121, 122}, []int{122}, []int{120}},
		{"dp2 from the API server", dp2, 100, []int{100, 110, 111, 112, 120, 121, 122}, []int{111, 122}, []int{110, 120}},
		{"sglang dp attention", sglangDPAttn, 204, []int{200, 203, 204, 205}, nil, nil},
		{"untitled", untitled, 300, []int{300, 301}, nil, nil},
		{"another user's process is not the server's", otherUser, 110, []int{100, 110, 111, 113}, []int{111}, []int{110}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ok := Find(c.t, c.pid)
			if !ok {
				t.Fatal("not found")
			}
			if got := pids(s.Procs); !slices.Equal(got, c.server) {
				t.Errorf("server %v, want %v", got, c.server)
			}
			if got := pids(place(t, s, verify)); !slices.Equal(got, c.verify) {
				t.Errorf("verify in %v, want %v", got, c.verify)
			}
			if got := pids(place(t, s, accept)); !slices.Equal(got, c.accept) {
				t.Errorf("accept in %v, want %v", got, c.accept)
			}
		})
	}
	for _, pid := range []int{200, 202, 204} {
		s, _ := Find(sglangDPAttn, pid)
		want := map[int][]int{200: {201, 203}, 202: {201}, 204: {203}}[pid] // a rank: its DP group's only
		if got := pids(place(t, s, []string{"scheduler"})); !slices.Equal(got, want) {
			t.Errorf("from %d: SGLang schedulers %v, want the lead of each DP group %v", pid, got, want)
		}
	}

	// Two servers started by one shell are two servers; by one Python
	// process, they look like one with two leads: refused, unless the
	// attached process is one of them.
	twoServers := func(exe string) table {
		sh := proc(400, 1, exe)
		return tree(sh, proc(410, 400, "VLLM::EngineCore"), proc(411, 410, "VLLM::Worker_TP0"),
			proc(420, 400, "VLLM::EngineCore"), proc(421, 420, "VLLM::Worker_TP0"))
	}
	s, _ := Find(twoServers("bash"), 421)
	if got := pids(place(t, s, accept)); !slices.Equal(got, []int{420}) {
		t.Errorf("under a shell: accept in %v, want [420]", got)
	}
	s, _ = Find(twoServers("python3"), 410)
	if got := pids(place(t, s, accept)); !slices.Equal(got, []int{410}) {
		t.Errorf("attached to one of two alike: accept in %v, want [410]", got)
	}
	if _, err := s.Place(verify); err == nil {
		t.Errorf("two rank-0 workers of two servers: no error")
	}
}

func place(t *testing.T, s Server, names []string) []Proc {
	t.Helper()
	ps, err := s.Place(names)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// A process that is its own parent, or a cycle the table was forged with,
// ends the walk.
func TestFindForgedTree(t *testing.T) {
	cyc := tree(proc(10, 11, "VLLM::A"), proc(11, 10, "VLLM::B"))
	s, ok := Find(cyc, 10)
	if !ok || len(s.Procs) != 2 {
		t.Fatalf("cycle: %v %v", pids(s.Procs), ok)
	}
	wide := table{1: proc(1, 0, "VLLM::EngineCore")}
	for i := 2; i < 2000; i++ {
		wide[i] = proc(i, 1, "VLLM::Worker_TP0")
	}
	if s, _ := Find(wide, 1); len(s.Procs) > maxProcs {
		t.Fatalf("%d processes kept, bound %d", len(s.Procs), maxProcs)
	}
	if _, ok := Find(table{}, 5); ok {
		t.Fatal("a process that is not there was found")
	}
}
