// Package testinterp is the one list of the CPython interpreters the tests
// and benchmarks run their targets on: pyenv's builds, Debian's distro
// build (no .symtab) and Debian trixie's 3.13 in a chroot (what production
// runs; scripts/trixie-python.sh makes it, .ci/run calls it). A test uses
// each one present and skips, saying so, without the one it needs; adding an
// interpreter is a line here.
package testinterp

import "os"

// The interpreters by name, for tests that need one build in particular.
const (
	Py39      = "/root/.pyenv/versions/3.9.18/bin/python3" // unsupported: for the refusal
	Py310     = "/root/.pyenv/versions/3.10.13/bin/python3"
	Py311     = "/root/.pyenv/versions/3.11.7/bin/python3"
	Py312     = "/root/.pyenv/versions/3.12.1/bin/python3" // the default of tests and benchmarks
	Py313     = "/root/.pyenv/versions/3.13.0/bin/python3"
	Debian311 = "/usr/bin/python3.11"
	// A launcher that runs trixie's /usr/bin/python3.13 chrooted, with the
	// same PID: the target is a process whose root is the chroot.
	Trixie313 = "/var/lib/specprobe-test/trixie-python3.13"
)

// Interp is one interpreter.
type Interp struct {
	Name   string // "3.12", "debian-3.11"
	Path   string
	Minor  int
	Distro bool // a distribution's build (stripped, or LTO)
}

// All are the interpreters every Python test runs on where present.
var All = []Interp{
	{"3.10", Py310, 10, false},
	{"3.11", Py311, 11, false},
	{"3.12", Py312, 12, false},
	{"3.13", Py313, 13, false},
	{"debian-3.11", Debian311, 11, true},
	{"trixie-3.13", Trixie313, 13, true},
}

// Present are those of All this machine has.
func Present() []Interp {
	var out []Interp
	for _, in := range All {
		if _, err := os.Stat(in.Path); err == nil {
			out = append(out, in)
		}
	}
	return out
}

// Paths are All's paths.
func Paths() []string {
	var out []string
	for _, in := range All {
		out = append(out, in.Path)
	}
	return out
}

// Name is the name of the interpreter at path ("3.12", "trixie-3.13"), or
// the path itself for one not in All: for naming subtests.
func Name(path string) string {
	for _, in := range All {
		if in.Path == path {
			return in.Name
		}
	}
	return path
}
