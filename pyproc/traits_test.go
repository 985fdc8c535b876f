package pyproc

import (
	"reflect"
	"testing"
)

// Each build's traits, as the docs' table of interpreters states them
// (docs/design.md "What a watchpoint trap sees").
func TestTraits(t *testing.T) {
	for _, c := range []struct {
		v    Version
		want Traits
	}{
		{Version{3, 9, 18}, Traits{Minor: 9}},
		{Version{3, 10, 13}, Traits{Minor: 10, Supported: true, TrapReads: true, Opcodes: opcodes[10], ArgsInCaller: true}},
		{Version{3, 11, 2}, Traits{Minor: 11, Supported: true, TrapReads: true, Opcodes: opcodes[11], PopsCurrentFrame: true, ManagedDict: 11,
			PushCalls: pushCalls[11], KWNames: 172, KWBack: 3}},
		{Version{3, 12, 3}, Traits{Minor: 12, Supported: true, TrapReads: true, Opcodes: opcodes[12],
			FrameObjectOwnsCode: true, ExcIsObject: true, Immortal: true, ManagedDict: 12, PushCalls: pushCalls[12], KWNames: 172, KWBack: 1}},
		{Version{3, 13, 5}, Traits{Minor: 13, Supported: true, TrapReads: true, Opcodes: opcodes[13],
			FrameObjectOwnsCode: true, ExcIsObject: true, Immortal: true, ManagedDict: 13, DebugOffsets: true,
			PushCalls: pushCalls[13], KWCalls: [2]uint8{57, 245}, SelfAbove: true}},
		{Version{3, 14, 0}, Traits{Minor: 14, Supported: true, FrameObjectOwnsCode: true, ExcIsObject: true, Immortal: true, ManagedDict: 13, DebugOffsets: true}},
		{Version{2, 7, 18}, Traits{Minor: 7}},
	} {
		if got := c.v.Traits(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.v, got, c.want)
		}
		if (c.v.unsupported() == nil) != c.want.Supported {
			t.Errorf("%s: unsupported() = %v, want supported %v", c.v, c.v.unsupported(), c.want.Supported)
		}
	}
	if !(Version{3, 12, 1}).sameVersion(0x030c01f0) || (Version{3, 12, 1}).sameVersion(0x030d00f0) {
		t.Error("sameVersion does not compare major and minor of a PY_VERSION_HEX")
	}
}
