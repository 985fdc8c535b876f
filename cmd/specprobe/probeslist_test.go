package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/specprobe/specprobe/probes"
)

func TestWriteList(t *testing.T) {
	rows := []listRow{
		{"demo", "", "draft,verify", "specdemo", "The bundled demo target, with a long description that goes on"},
		{"sglang-multi-layer-eagle", "MultiLayerEagleWorkerV2", "draft,verify,accept", "import sglang.srt.speculative.eagle_worker_v2", "SGLang"},
	}
	cases := []struct {
		name  string
		width int
		wide  bool
		want  string
	}{
		{"terminal of 60 columns: descriptions cut to fit", 60, false,
			"ENGINE                    STAGES               DESCRIPTION\n" +
				"demo                      draft,verify         The bundled…\n" +
				"sglang-multi-layer-eagle  draft,verify,accept  SGLang\n"},
		{"piped: nothing cut, no MATCHES", 0, false,
			"ENGINE                    STAGES               DESCRIPTION\n" +
				"demo                      draft,verify         The bundled demo target, with a long description that goes on\n" +
				"sglang-multi-layer-eagle  draft,verify,accept  SGLang\n"},
		{"too narrow for any description", 40, false,
			"ENGINE                    STAGES               DESCRIPTION\n" +
				"demo                      draft,verify         …\n" +
				"sglang-multi-layer-eagle  draft,verify,accept  …\n"},
		{"wide: every column, nothing cut", 60, true,
			"ENGINE                    WORKER                   STAGES               MATCHES                                        DESCRIPTION\n" +
				"demo                      -                        draft,verify         specdemo                                       The bundled demo target, with a long description that goes on\n" +
				"sglang-multi-layer-eagle  MultiLayerEagleWorkerV2  draft,verify,accept  import sglang.srt.speculative.eagle_worker_v2  SGLang\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeList(&b, rows, c.width, c.wide); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
}

// The real catalog on an 80-column terminal: no row wraps.
func TestCatalogListFits80(t *testing.T) {
	specs, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeList(&b, catalogRows(specs), 80, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("%d columns: %q", n, line)
		}
	}
}
