package probes

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadRefusesSpecialFiles: a FIFO would block Load forever and
// /dev/zero would grow until memory ran out; both, and an oversized file,
// are refused at once with the file named.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "spec.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("engine: x\n"+strings.Repeat("#", MaxSpecBytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "FIFO", "/dev/zero": "character device", big: "more than the"} {
		done := make(chan error, 1)
		go func() { _, err := Load(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Load(%s) = %v, want an error naming it and saying %q", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still running after 5s", path)
		}
	}
}
