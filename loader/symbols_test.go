package loader

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildOverloads compiles testdata/overloads.cpp with the given flags.
func buildOverloads(t *testing.T, flags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "overloads")
	args := append([]string{"-O2", "-fno-omit-frame-pointer", "-o", out, "testdata/overloads.cpp"}, flags...)
	if b, err := exec.Command("g++", args...).CombinedOutput(); err != nil {
		t.Skipf("g++ could not build the test binary (%v): %s", err, b)
	}
	return out
}

func TestFindSymbolForms(t *testing.T) {
	bin := buildOverloads(t, "-fcf-protection=none")
	for _, want := range []string{
		"engine::draft_tokens",       // demangled, no parameters
		"engine::draft_tokens(int)",  // full signature
		"_ZN6engine12draft_tokensEi", // mangled
		"engine::Sampler::accept",    // a method
		"engine::verify(int, int)",   // one overload, by signature
		"engine::Sampler::accept(std::vector<int, std::allocator<int> > const&, bool)",
	} {
		s, err := FindSymbol(bin, want)
		if err != nil || s == nil {
			t.Errorf("FindSymbol(%q) = %v, %v", want, s, err)
			continue
		}
		if s.Offset == 0 || s.Size == 0 {
			t.Errorf("%q: offset %#x size %d", want, s.Offset, s.Size)
		}
	}
	a, _ := FindSymbol(bin, "engine::verify(int)")
	b, _ := FindSymbol(bin, "engine::verify(int, int)")
	if a == nil || b == nil || a.Offset == b.Offset {
		t.Errorf("the two overloads resolve to %v and %v", a, b)
	}
}

func TestFindSymbolAmbiguousAndMissing(t *testing.T) {
	bin := buildOverloads(t)
	_, err := FindSymbol(bin, "engine::verify")
	if err == nil || !strings.Contains(err.Error(), "matches 2 functions") || !strings.Contains(err.Error(), "engine::verify(int, int)") {
		t.Errorf("ambiguous overload: %v", err)
	}
	s, err := FindSymbol(bin, "engine::verfy")
	if s != nil || err != nil {
		t.Errorf("missing symbol: %v, %v", s, err)
	}
	near := NearNames(bin, "engine::verfy", 5)
	if len(near) == 0 || near[0] != "engine::verify" {
		t.Errorf("near names for engine::verfy: %v", near)
	}
}

func TestProbeOffsetSkipsEndbr64(t *testing.T) {
	cet := buildOverloads(t, "-fcf-protection=full")
	s, err := FindSymbol(cet, "engine::draft_tokens")
	if err != nil || s == nil {
		t.Fatal(s, err)
	}
	off, first, err := ProbeOffset(cet, s, true)
	if err != nil || off != s.Offset+4 || !strings.HasPrefix(first, "endbr64; ") {
		t.Errorf("with skip: %#x (symbol at %#x) %q %v", off, s.Offset, first, err)
	}
	off, first, err = ProbeOffset(cet, s, false)
	if err != nil || off != s.Offset || first != "endbr64" {
		t.Errorf("without skip: %#x %q %v", off, first, err)
	}
	plain := buildOverloads(t, "-fcf-protection=none")
	s, _ = FindSymbol(plain, "engine::draft_tokens")
	off, first, err = ProbeOffset(plain, s, true)
	if err != nil || off != s.Offset || strings.Contains(first, "endbr64") {
		t.Errorf("no endbr64: %#x %q %v", off, first, err)
	}
}

func TestMatchBinary(t *testing.T) {
	for _, c := range []struct {
		path, name string
		want       bool
	}{
		{"/usr/lib/libllama-common.so.0.2.0", "libllama-common.so", true},
		{"/usr/lib/libllama-common.so", "libllama-common.so", true},
		{"/opt/bin/llama-server", "llama-server", true},
		{"/opt/bin/llama-server", "bin/llama-server", true},
		{"/opt/bin/llama-server-impl", "llama-server", false},
		{"/usr/lib/libllama.so.0", "libllama-common.so", false},
	} {
		if got := MatchBinary(c.path, c.name); got != c.want {
			t.Errorf("MatchBinary(%q, %q) = %v", c.path, c.name, got)
		}
	}
}
