package tracer

import (
	"reflect"
	"testing"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/loader"
)

// An exit's field the pop found freed takes what the push read, only when
// the push read that very object.
func TestWithPushed(t *testing.T) {
	freed := func(addr uint64) loader.PyValues {
		return loader.PyValues{Err: &loader.PyReadError{Code: uint8(bpf.StagePyErrPY_E_FREED), Step: -1, Item: -1, Detail: addr}}
	}
	ok := func(v ...any) loader.PyValues { return loader.PyValues{Values: v, List: true} }
	pushed := func(root uint64, v ...any) loader.PyValues { return loader.PyValues{Values: v, List: true, Root: root} }
	notTemp := loader.PyValues{Err: &loader.PyReadError{Code: uint8(bpf.StagePyErrPY_E_NOTTEMP), Step: -1, Item: -1}}
	read := func(f ...loader.PyValues) *loader.PyCallRead { return &loader.PyCallRead{Fields: f} }
	for _, c := range []struct {
		name       string
		exit, push *loader.PyCallRead
		want       *loader.PyCallRead
		took       int
	}{
		{"freed, pushed the same object", read(freed(0x100), ok(int64(1))), read(pushed(0x100, "a", "b"), notTemp),
			read(pushed(0x100, "a", "b"), ok(int64(1))), 1},
		{"freed, pushed another object", read(freed(0x100)), read(pushed(0x200, "a")), read(freed(0x100)), 0},
		{"read at the pop: the pop's values stand", read(ok("x")), read(pushed(0x100, "a")), read(ok("x")), 0},
		{"the push read nothing", read(freed(0x100)), read(notTemp), read(freed(0x100)), 0},
		{"no entry read", read(freed(0x100)), nil, read(freed(0x100)), 0},
		{"fields differ in number", read(freed(0x100)), read(pushed(0x100, "a"), notTemp), read(freed(0x100)), 0},
		{"another error at the pop", read(loader.PyValues{Err: &loader.PyReadError{Code: uint8(bpf.StagePyErrPY_E_NOATTR), Detail: 0x100}}), read(pushed(0x100, "a")),
			read(loader.PyValues{Err: &loader.PyReadError{Code: uint8(bpf.StagePyErrPY_E_NOATTR), Detail: 0x100}}), 0},
	} {
		got, n := withPushed(c.exit, c.push)
		if n != c.took || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: took %d %+v, want %d %+v", c.name, n, got, c.took, c.want)
		}
	}
}

// Each exit takes its own entry's reads: the innermost open call's.
func TestPushedStack(t *testing.T) {
	m := pushedReads{}
	k, other := callKey{1, 10}, callKey{1, 11}
	a, b := &loader.PyCallRead{}, &loader.PyCallRead{}
	m.entry(k, a)
	m.entry(k, nil) // a nested call whose push read nothing
	m.entry(k, b)
	m.entry(other, b)
	if m.exit(k) != b || m.exit(k) != nil || m.exit(k) != a || m.exit(k) != nil {
		t.Error("exits did not take their entries' reads, innermost first")
	}
	m.forget(11)
	if len(m) != 0 {
		t.Errorf("%d stacks left after the thread was forgotten", len(m))
	}
	for range maxPushed + 5 {
		m.entry(k, a)
	}
	if len(m[k]) != maxPushed {
		t.Errorf("%d kept, want at most %d", len(m[k]), maxPushed)
	}
}
