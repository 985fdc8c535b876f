package daemon

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The Grafana dashboard in deploy/grafana charts what the daemon exports:
// every query (panels and variables) names metric families found on a
// scrape of /metrics, with labels its series carry; the latency and
// acceptance panels ask for exemplars, and the data source links an
// exemplar by the label /metrics puts the trace id under.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	body, families := scrape(t)
	raw, err := os.ReadFile("../deploy/grafana/specprobe-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct {
				Expr     string
				Exemplar bool
			}
		}
		Templating struct {
			List []struct {
				Name  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("specprobe-dashboard.json: %v", err)
	}
	var exprs []string
	exemplars := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
			if strings.Contains(q.Expr, "_bucket") && q.Exemplar {
				exemplars++
			}
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			exprs = append(exprs, q["query"].(string))
		}
	}
	metric := regexp.MustCompile(`\bspecprobe_[a-z0-9_]+\b`)
	label := regexp.MustCompile(`(?:by|ignoring) \(([^)]*)\)|([a-z_]+)=~?"|label_values\([a-z_]+, ([a-z_]+)\)`)
	for _, e := range exprs {
		names := metric.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("query names no specprobe metric: %s", e)
		}
		for _, n := range names {
			if !families[n] && !strings.HasPrefix(n, "specprobe_spec_position") && !strings.HasPrefix(n, "specprobe_engine") && !strings.HasPrefix(n, "specprobe_stage") {
				t.Errorf("query names %s, which /metrics does not export: %s", n, e)
			}
		}
		for _, m := range label.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(m[1]+","+m[2]+","+m[3], ",") {
				if l = strings.TrimSpace(l); l != "" && l != "le" && !strings.Contains(body, l+`="`) {
					t.Errorf("query uses label %s, which no series has: %s", l, e)
				}
			}
		}
	}
	if exemplars < 2 {
		t.Errorf("%d histogram queries ask for exemplars, want the acceptance and latency panels", exemplars)
	}

	src, err := os.ReadFile("../deploy/grafana/datasource.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Datasources []struct {
			Type     string
			JSONData struct {
				Destinations []struct{ Name string } `yaml:"exemplarTraceIdDestinations"`
			} `yaml:"jsonData"`
		}
	}
	if err := yaml.Unmarshal(src, &ds); err != nil || len(ds.Datasources) != 1 || len(ds.Datasources[0].JSONData.Destinations) == 0 {
		t.Fatalf("datasource.yaml: %v %+v", err, ds)
	}
	for _, d := range ds.Datasources[0].JSONData.Destinations {
		if !regexp.MustCompile(`# \{[^}]*\btrace_id="`).MatchString(body) || d.Name != "trace_id" {
			t.Errorf("exemplar link on label %q; /metrics writes exemplars with trace_id", d.Name)
		}
	}
}
