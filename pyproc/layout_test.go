package pyproc

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The offset tables are CPython's own struct layouts: testdata/offsets.c
// prints offsetof of each field from an interpreter's headers, and every
// number it prints must be the table's. Runs for each interpreter with
// headers here (pyenv installs them with the internal ones).
func TestLayoutMatchesHeaders(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc to build testdata/offsets.c")
	}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".pyenv")
	}
	tested := 0
	for _, minor := range []int{10, 11, 12} {
		m := strconv.Itoa(minor)
		inc, _ := filepath.Glob(filepath.Join(root, "versions", "3."+m+".*", "include", "python3."+m))
		if len(inc) == 0 {
			continue
		}
		tested++
		bin := filepath.Join(t.TempDir(), "offsets")
		out, err := exec.Command("gcc", "-w", "-I"+inc[0], "-o", bin, "testdata/offsets.c").CombinedOutput()
		if err != nil {
			t.Fatalf("3.%d: building offsets.c against %s: %v\n%s", minor, inc[0], err, out)
		}
		out, err = exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("3.%d: %v", minor, err)
		}
		l, err := tableLayout(Version{3, minor, 0})
		if err != nil {
			t.Fatal(err)
		}
		v := reflect.ValueOf(l)
		sc := bufio.NewScanner(bytes.NewReader(out))
		fields := 0
		for sc.Scan() {
			name, num, _ := strings.Cut(sc.Text(), " ")
			want, _ := strconv.ParseInt(num, 10, 64)
			f := v.FieldByName(name)
			if !f.IsValid() {
				t.Errorf("offsets.c prints %s, which Layout has not", name)
				continue
			}
			fields++
			var got int64
			if f.CanInt() {
				got = f.Int()
			} else {
				got = int64(f.Uint())
			}
			if got != want {
				t.Errorf("3.%d %s: table %#x, headers %#x (%s)", minor, name, got, want, inc[0])
			}
		}
		t.Logf("3.%d: %d offsets agree with %s", minor, fields, inc[0])
	}
	if tested == 0 {
		t.Skip("no CPython 3.10-3.12 headers under " + root + " (pyenv installs them)")
	}
}
