package redact

import (
	"slices"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"python3", "-m", "sglang.launch_server", "--api-key=sk-SECRET-123", "--port", "30000"},
			[]string{"python3", "-m", "sglang.launch_server", "--api-key=REDACTED", "--port", "30000"}},
		{[]string{"vllm", "serve", "--api-key", "sk-SECRET-123", "--hf-token", "hf_abc", "--model", "m"},
			[]string{"vllm", "serve", "--api-key", "REDACTED", "--hf-token", "REDACTED", "--model", "m"}},
		{[]string{"env", "HF_TOKEN=hf_abc", "OPENAI_API_KEY=sk-x", "PATH=/bin", "srv"},
			[]string{"env", "HF_TOKEN=REDACTED", "OPENAI_API_KEY=REDACTED", "PATH=/bin", "srv"}},
		{[]string{"srv", "--model-url=https://bob:hunter2@models.example/x", "s3://AKIA:secret@bucket/k"},
			[]string{"srv", "--model-url=https://REDACTED@models.example/x", "s3://REDACTED@bucket/k"}},
		{[]string{"srv", "--db", "postgres://u:p@db:5432/x?sslmode=disable&password=p2"},
			[]string{"srv", "--db", "postgres://REDACTED@db:5432/x?password=REDACTED&sslmode=disable"}},
		{[]string{"srv", "--Password:", "x", "--client-secret"},
			[]string{"srv", "--Password:", "REDACTED", "--client-secret"}},
		// A secret flag followed by another flag keeps that flag.
		{[]string{"srv", "--token", "--port", "1"}, []string{"srv", "--token", "--port", "1"}},
		{[]string{"llama-server", "-m", "/models/a.gguf", "-c", "4096"}, []string{"llama-server", "-m", "/models/a.gguf", "-c", "4096"}},
	} {
		if got := Args(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Args(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	args := []string{"srv", "--api-key=sk-SECRET-123"}
	if _, ok := CommandLine(args, Off); ok {
		t.Error("Off exports a command line")
	}
	if got, _ := CommandLine(args, Redacted); strings.Contains(got, "SECRET") || got != "srv --api-key=REDACTED" {
		t.Errorf("Redacted: %q", got)
	}
	if got, _ := CommandLine(args, Full); got != "srv --api-key=sk-SECRET-123" {
		t.Errorf("Full: %q", got)
	}
	for in, want := range map[string]Mode{"": Off, "off": Off, "redacted": Redacted, "full": Full} {
		if m, err := ParseMode(in); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, m, err)
		}
	}
	if _, err := ParseMode("yes"); err == nil {
		t.Error("ParseMode(yes): no error")
	}
}
