package testreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Stream copies a `go test -json` stream to save while it runs and shows
// what plain `go test` would: each package's result line, and the whole
// output of every top-level test that failed, its subtests' included. With
// progress it also shows each top-level test's result as it ends (a guest
// runs for many minutes). Lines that are not events (a build error) are
// shown as they are.
func Stream(r io.Reader, save, show io.Writer, progress bool) error {
	held := map[string][]string{} // package and top-level test -> its output so far
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e Event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(show, "%s\n", line)
			continue
		}
		if _, err := fmt.Fprintf(save, "%s\n", line); err != nil {
			return err
		}
		if e.Test == "" {
			if e.Action == "output" && e.Output != "PASS\n" && e.Output != "FAIL\n" {
				fmt.Fprint(show, e.Output)
			}
			continue
		}
		top := strings.SplitN(e.Test, "/", 2)[0]
		key := e.Package + " " + top
		if e.Action == "output" {
			held[key] = append(held[key], e.Output)
			continue
		}
		if e.Test != top || (e.Action != "pass" && e.Action != "fail" && e.Action != "skip") {
			continue
		}
		if e.Action == "fail" {
			fmt.Fprint(show, strings.Join(held[key], ""))
		} else if progress {
			fmt.Fprintf(show, "--- %s: %s (%.1fs)\n", strings.ToUpper(e.Action), e.Test, e.Elapsed)
		}
		delete(held, key)
	}
	return sc.Err()
}
