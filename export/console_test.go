package export_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/export"
)

func TestConsole(t *testing.T) {
	spans := recordContract(t)
	var buf bytes.Buffer
	if err := (viaSDK{export.NewConsole(&buf)}).ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines, want one per stage span (6):\n%s", len(lines), buf.String())
	}
	line, ok := export.FormatStageLine(record(find(t, spans, "spec_verify", ridA)), time.UTC)
	if !ok {
		t.Fatal("verify not recognised as a stage span")
	}
	want := "22:13:20.126456 tid=102 VERIFY           2.500ms rid=" + ridA + " num_correct_drafts=3"
	if line != want {
		t.Errorf("line\n got %q\nwant %q", line, want)
	}
	line, _ = export.FormatStageLine(record(find(t, spans, "spec_draft_extend", ridB)), time.UTC)
	if !strings.HasSuffix(line, `DRAFT_EXTEND     0.250ms rid=`+ridB+` error="cuda oom"`) {
		t.Errorf("error line = %q", line)
	}
	if _, ok := export.FormatStageLine(record(find(t, spans, "decode_forward", ridA)), time.UTC); ok {
		t.Error("decode_forward should not be printed")
	}
}
