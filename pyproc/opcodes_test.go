package pyproc

import (
	"github.com/specprobe/specprobe/internal/testinterp"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The opcodes the reader at the trap compares are each interpreter's own
// (Lib/opcode.py): checked against every interpreter installed here.
func TestTrapOpcodes(t *testing.T) {
	tested := 0
	for minor, want := range opcodes {
		py := "/root/.pyenv/versions/3." + strconv.Itoa(minor)
		matches, _ := os.ReadDir("/root/.pyenv/versions")
		for _, m := range matches {
			if strings.HasPrefix(m.Name(), "3."+strconv.Itoa(minor)+".") {
				py = "/root/.pyenv/versions/" + m.Name() + "/bin/python3"
			}
		}
		if _, err := os.Stat(py); err != nil {
			continue
		}
		out, err := exec.Command(py, "-c", "import opcode, sys\nfor n in sys.argv[1:]: print(opcode.opmap.get(n, 0))", opcodeNames[0], opcodeNames[1],
			opcodeNames[2], opcodeNames[3], opcodeNames[4], opcodeNames[5], opcodeNames[6], opcodeNames[7]).Output()
		if err != nil {
			t.Fatalf("%s: %v", py, err)
		}
		tested++
		for i, f := range strings.Fields(string(out)) {
			if n, _ := strconv.Atoi(f); i < len(want) && uint8(n) != want[i] {
				t.Errorf("3.%d: %s is %d, the table says %d", minor, opcodeNames[i], n, want[i])
			}
		}
	}
	if tested == 0 {
		t.Skip("no pyenv interpreter installed")
	}
}

// The opcodes a push read knows (pushCalls, KW_NAMES) are the ones each
// interpreter here names so, specializations included.
func TestPushCallOpcodes(t *testing.T) {
	const script = `import dis, sys
m = getattr(dis, "_all_opmap", None)
if m is None:
    import _opcode_metadata as md
    m = dict(md._specialized_opmap)
    m.update(md.opmap)
for n in sys.argv[1:]: print(m.get(n, -1))
`
	tested := 0
	for _, py := range testinterp.Present() {
		if pushCallNames[py.Minor] == nil {
			continue
		}
		out, err := exec.Command(py.Path, append([]string{"-c", script, "KW_NAMES"}, pushCallNames[py.Minor]...)...).Output()
		if err != nil {
			t.Fatalf("%s: %v", py.Path, err)
		}
		tested++
		tr := Version{3, py.Minor, 0}.Traits()
		got := strings.Fields(string(out))
		if want := strconv.Itoa(int(tr.KWNames)); tr.KWNames != 0 && got[0] != want {
			t.Errorf("%s: KW_NAMES is %s, the table says %s", py.Path, got[0], want)
		}
		for i, name := range pushCallNames[py.Minor] {
			if n, _ := strconv.Atoi(got[i+1]); n != int(tr.PushCalls[i]) {
				t.Errorf("%s: %s is %d, the table says %d", py.Path, name, n, tr.PushCalls[i])
			}
		}
	}
	if tested == 0 {
		t.Skip("no interpreter installed")
	}
}
