package export_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/export"
)

// Every kind is complete, named once, listed in the help, and opens.
func TestKinds(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	seen := map[string]bool{}
	help := export.Help()
	for _, k := range export.Kinds {
		if k.Name == "" || k.Help == "" || seen[k.Name] {
			t.Errorf("kind %+v: needs a unique name and a help line", k)
		}
		seen[k.Name] = true
		if k.OTLP == (k.New != nil) {
			t.Errorf("%s: an OTLP kind is built by NewOTLP, any other by its New", k.Name)
		}
		if !strings.Contains(help, "  "+k.Name+" ") || !strings.Contains(export.Names(), k.Name) {
			t.Errorf("%s missing from the help:\n%s", k.Name, help)
		}
		if got, ok := export.Lookup(k.Name); !ok || got.Name != k.Name {
			t.Errorf("Lookup(%s) = %v %v", k.Name, got.Name, ok)
		}
		arg := k.Name
		if k.File {
			arg += "=" + filepath.Join(t.TempDir(), "out")
		}
		exps, closeFiles, err := export.Open(context.Background(), []string{arg}, "", &bytes.Buffer{})
		if err != nil || len(exps) != 1 || exps[0].Name != k.Name || exps[0].Exporter == nil {
			t.Errorf("Open(%s) = %v, %v", arg, exps, err)
			continue
		}
		_ = exps[0].Shutdown(context.Background())
		closeFiles()
	}
	if _, ok := export.Lookup("jaeger"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}

func TestOpen(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		output string
		want   []string // exporter names, nil with an error
		err    string
	}{
		{"none", nil, "", []string{}, ""},
		{"console", []string{"console"}, "", []string{"console"}, ""},
		{"file from --output", []string{"perfetto"}, out, []string{"perfetto"}, ""},
		{"file needs a path", []string{"otlp-file"}, "", nil, "--exporter otlp-file needs a file"},
		{"two files need two paths", []string{"otlp-file", "perfetto"}, out, nil, "otlp-file=FILE when several"},
		{"two files with paths", []string{"otlp-file=" + out + "1", "perfetto=" + out + "2"}, "", []string{"otlp-file", "perfetto"}, ""},
		{"unknown", []string{"console", "jaeger"}, "", nil, `unknown exporter "jaeger" (have: otlp, otlp-grpc, otlp-http, otlp-file, perfetto, console)`},
		{"unwritable", []string{"perfetto=" + filepath.Join(dir, "no", "such", "dir")}, "", nil, "exporter perfetto: output file " + filepath.Join(dir, "no", "such", "dir") + ": no such file"},
		{"symlink", []string{"otlp-file=" + link}, "", nil, "refusing to write through a symlink"},
		{"otlp", []string{"otlp-grpc", "otlp-http"}, "", []string{"otlp-grpc", "otlp-http"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			exps, closeFiles, err := export.Open(context.Background(), c.args, c.output, &bytes.Buffer{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer closeFiles()
			var got []string
			for _, e := range exps {
				got = append(got, e.Name)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("exporters %v, want %v", got, c.want)
			}
		})
	}
	// Without --exporter, an OTLP endpoint in the environment means OTLP.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	exps, closeFiles, err := export.Open(context.Background(), nil, "", os.Stdout)
	if err != nil || len(exps) != 1 || exps[0].Name != "otlp" {
		t.Errorf("with an endpoint set: %v %v", exps, err)
	}
	closeFiles()
}

func TestMetricReader(t *testing.T) {
	for _, c := range []struct {
		name     string
		spans    []string
		endpoint string
		reader   bool
		err      string
	}{
		{"", nil, "", false, ""},
		{"", []string{"console", "perfetto=x"}, "", false, ""}, // no OTLP span exporter: no metrics
		{"", []string{"console", "otlp-http"}, "", true, ""},   // metrics follow OTLP spans
		{"", nil, "http://127.0.0.1:1", true, ""},              // or an endpoint in the environment
		{"none", []string{"otlp"}, "", false, ""},
		{"otlp-grpc", nil, "", true, ""},
		{" otlp ", nil, "", true, ""},
		{"console", nil, "", false, `unknown metrics exporter "console" (have: otlp, otlp-grpc, otlp-http, none)`},
		{"prometheus", nil, "", false, "unknown metrics exporter"},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
		r, err := export.MetricReader(context.Background(), c.name, c.spans)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("MetricReader(%q, %v): err %v, want %q", c.name, c.spans, err, c.err)
			}
		case err != nil:
			t.Errorf("MetricReader(%q, %v): %v", c.name, c.spans, err)
		case (r != nil) != c.reader:
			t.Errorf("MetricReader(%q, %v) = %v, want a reader: %v", c.name, c.spans, r, c.reader)
		}
		if r != nil {
			_ = r.Shutdown(context.Background())
		}
	}
	if _, err := export.NewOTLPMetricReader(context.Background(), "http/json"); err == nil {
		t.Error("http/json should be rejected")
	}
}
