// Command testreport is the test suite's reporter (make test):
//
//	go test -json ... | testreport stream [-progress] FILE
//	testreport summary [-any] DIR...
//
// stream saves the events to FILE and shows what plain go test shows.
// summary reads each DIR, one place the tests ran (its place.json and its
// streams, *.json), prints a line per place and interpreter with what ran
// and what was skipped, and exits 1 when the tests failed somewhere or the
// Python tests ran nowhere (internal/testreport).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/specprobe/specprobe/internal/testreport"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "stream":
		fs := flag.NewFlagSet("stream", flag.ExitOnError)
		progress := fs.Bool("progress", false, "show each top-level test's result as it ends")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 1 {
			usage()
		}
		f, err := os.Create(fs.Arg(0))
		if err != nil {
			fatal(err)
		}
		if err := testreport.Stream(os.Stdin, f, os.Stdout, *progress); err != nil {
			fatal(err)
		}
		if err := f.Close(); err != nil {
			fatal(err)
		}
	case "summary":
		fs := flag.NewFlagSet("summary", flag.ExitOnError)
		byHand := fs.Bool("any", false, "a run by hand: fail on failures only, not when the Python tests ran nowhere")
		_ = fs.Parse(os.Args[2:])
		var places []*testreport.Place
		for _, dir := range fs.Args() {
			p, err := readPlace(dir)
			if err != nil {
				fatal(err)
			}
			places = append(places, p)
		}
		fmt.Println("What ran where (a skipped test is not a pass):")
		for _, p := range places {
			for _, l := range testreport.Lines(p) {
				fmt.Println("  " + l.String())
			}
		}
		if bad := testreport.Verdict(places, !*byHand); len(bad) > 0 {
			for _, b := range bad {
				fmt.Println("FAIL: " + b)
			}
			os.Exit(1)
		}
	default:
		usage()
	}
}

func readPlace(dir string) (*testreport.Place, error) {
	p := &testreport.Place{Name: filepath.Base(dir)}
	if b, err := os.ReadFile(filepath.Join(dir, "place.json")); err == nil {
		if err := json.Unmarshal(b, p); err != nil {
			return nil, fmt.Errorf("%s/place.json: %w", dir, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		if filepath.Base(f) == "place.json" {
			continue
		}
		r, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		evs, err := testreport.ReadEvents(r)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		p.Events = append(p.Events, evs...)
	}
	return p, nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testreport stream [-progress] FILE < go-test-json | testreport summary [-any] DIR...")
	os.Exit(2)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "testreport:", err)
	os.Exit(1)
}
