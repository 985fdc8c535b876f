// Package docs holds the repository's documentation; its test checks that
// the docs stand alone.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repository's text never sends a reader outside it: no notes of the
// machine it was written on, no path that only exists there.
func TestDocsStayInTheRepo(t *testing.T) {
	outside := []string{".." + "/shared", "shared" + "/docs"}
	root := ".."
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "out":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".md", ".go", ".c", ".h", ".yaml", ".yml", ".sh", ".py":
		default:
			if d.Name() != "Makefile" && d.Name() != "Dockerfile" {
				return nil
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(data), "\n") {
			for _, o := range outside {
				if strings.Contains(line, o) {
					t.Errorf("%s:%d names %q, which is not in the repository: %s", path, i+1, o, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: not the repository?", checked)
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// README and docs/ speak of paths a reader has, and their links lead to
// files that exist.
func TestDocLinks(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	files = append(files, "../README.md", "../BENCHMARKS.md", "../deploy/README.md")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "/work"+"/") {
				t.Errorf("%s:%d names a path of the machine it was written on: %s", f, i+1, strings.TrimSpace(line))
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target, _, _ := strings.Cut(m[1], "#")
				if target == "" || strings.Contains(target, "://") {
					continue
				}
				if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
					t.Errorf("%s:%d links to %s, which does not exist", f, i+1, m[1])
				}
			}
		}
	}
	if _, err := os.Stat("design.md"); err != nil {
		t.Error("docs/design.md is missing: README and code comments point there")
	}
}
