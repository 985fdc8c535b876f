package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// layers is docs/design.md's map of packages as floors: a package imports
// only from its own floor or below, so a change low in the house never
// needs the floors above it. A new package gets its floor here.
var layers = map[string]int{
	"bpf": 0, "spanschema": 0, "spanrec": 0, "internal/safefile": 0, "internal/ktime": 0,
	"internal/near": 0, "internal/perfbp": 0, "internal/bpfring": 0, "internal/redact": 0, "internal/elfsym": 0, "internal/testinterp": 0,
	"internal/procfs": 1, "procgroup": 1, "pyproc": 1, "k8smeta": 1, "export": 1, "export/otlptest": 1,
	"spanbuilder": 1, "gpu": 1, "discover": 1, "internal/benchprobes": 1, "internal/testreport": 1,
	"probes": 2, "specmetrics": 2,
	"loader":        3,
	"tracer":        4,
	"daemon":        5,
	"cmd/specprobe": 6, "cmd/gpucheck": 6, "cmd/testreport": 6, "bench": 6, "integration": 6, "docs": 6, "deploy": 6,
}

const module = "github.com/specprobe/specprobe/"

// floor is the layer of a package directory (bench/x is bench's).
func floor(dir string) (int, bool) {
	for d := dir; d != "."; d = filepath.Dir(d) {
		if l, ok := layers[filepath.ToSlash(d)]; ok {
			return l, true
		}
	}
	return 0, false
}

// No non-test import runs back up a floor, and every package has a floor.
func TestImportsRunDown(t *testing.T) {
	root := ".."
	imports := map[string]map[string]bool{} // package dir: the module's packages it imports
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "out", "testdata", "pytargets", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		if imports[dir] == nil {
			imports[dir] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok {
				imports[dir][rest] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for d := range imports {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		own, ok := floor(dir)
		if !ok {
			t.Errorf("%s has no floor in layers: give it one (docs/design.md's package table)", dir)
			continue
		}
		for im := range imports[dir] {
			if l, ok := floor(im); ok && l > own {
				t.Errorf("%s (floor %d) imports %s (floor %d): an import back up the house", dir, own, im, l)
			}
		}
	}
	if len(dirs) < 20 {
		t.Errorf("only %d package directories found: the walk missed the tree", len(dirs))
	}
}
