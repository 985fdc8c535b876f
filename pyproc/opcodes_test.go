package pyproc

import (
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
