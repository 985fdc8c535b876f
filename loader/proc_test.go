package loader

import (
	"os/exec"
	"slices"
	"testing"
)

// attach and the daemon match a process by one record: the command line
// trimmed as specs match it (the daemon once kept a trailing space where a
// title was padded or the last argument empty), the title, the executable
// and the files it maps.
func TestProcessRecord(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read x", "sh", "") // waits on its stdin
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh to run: %v", err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	p, err := ProcessRecord(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := "sh -c read x sh"; p.Cmdline != want {
		t.Errorf("command line %q, want %q (arguments joined, trimmed)", p.Cmdline, want)
	}
	if p.Exe == "" || p.Title != "sh" {
		t.Errorf("exe %q, title %q; want an executable, sh", p.Exe, p.Title)
	}
	if !slices.ContainsFunc(p.Mapped, func(m string) bool { return MatchBinary(m, p.Exe) }) {
		t.Errorf("mapped files %v do not hold the executable", p.Mapped)
	}
}
