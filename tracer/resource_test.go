package tracer

import (
	"os"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/probes"
)

// The ranks the spec reads from the process title go on the resource under
// the attributes the spec names; a rank the title does not name is left out.
func TestResourceRanks(t *testing.T) {
	spec, err := probes.Lookup("sglang")
	if err != nil {
		t.Fatal(err)
	}
	ranks, err := spec.Match.RanksOf("sglang::scheduler_DP1_TP0")
	if err != nil {
		t.Fatal(err)
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range processResource(Config{PID: os.Getpid(), Spec: spec}, ranks).Attributes() {
		got[kv.Key] = kv.Value
	}
	if got["sglang.tp_rank"] != attribute.IntValue(0) || got["sglang.dp_rank"] != attribute.IntValue(1) {
		t.Errorf("ranks on the resource: tp %v dp %v", got["sglang.tp_rank"], got["sglang.dp_rank"])
	}
	if _, ok := got["sglang.pp_rank"]; ok {
		t.Errorf("a PP rank the title does not name: %v", got["sglang.pp_rank"])
	}
	if got["service.name"] != attribute.StringValue("sglang") {
		t.Errorf("service.name %v", got["service.name"])
	}
}
