package procgroup

import (
	"strings"
	"testing"
)

// A spec may name in a stage's process list exactly what a title can carry.
func TestIsNameMatchesParseTitle(t *testing.T) {
	for _, name := range []string{"Worker", "EngineCore", "scheduler", "data_parallel_controller", "a.b-c", "1Worker", "", "Worker::x", "VLLM::Worker"} {
		_, ok := ParseTitle("VLLM::" + name)
		if IsName(name) != (ok && !strings.Contains(name, "::")) {
			t.Errorf("IsName(%q) = %v, ParseTitle reads it: %v", name, IsName(name), ok)
		}
	}
}
