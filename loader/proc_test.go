package loader

import (
	"bufio"
	"os/exec"
	"slices"
	"testing"
)

// attach and the daemon match a process by one record: the command line
// trimmed as specs match it (the daemon once kept a trailing space where a
// title was padded or the last argument empty), the title, the executable
// and the files it maps.
func TestProcessRecord(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo ready; read x", "sh", "") // waits on its stdin
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh to run: %v", err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	// The exec has set up the new command line once the shell runs: Start
	// returns a little before (the exec closes its pipe first).
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the shell said %q, %v", line, err)
	}
	p, err := ProcessRecord(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := "sh -c echo ready; read x sh"; p.Cmdline != want {
		t.Errorf("command line %q, want %q (arguments joined, trimmed)", p.Cmdline, want)
	}
	if p.Exe == "" || p.Title != "sh" {
		t.Errorf("exe %q, title %q; want an executable, sh", p.Exe, p.Title)
	}
	if !slices.ContainsFunc(p.Mapped, func(m string) bool { return MatchBinary(m, p.Exe) }) {
		t.Errorf("mapped files %v do not hold the executable", p.Mapped)
	}
}
