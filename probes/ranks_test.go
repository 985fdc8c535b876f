package probes

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanschema"
)

// The catalog reads SGLang's and vLLM's ranks from their process titles
// (the formats in docs/upstream.md), traces TP rank 0 of each group, and
// names the process it traces instead of another rank.
func TestCatalogRanks(t *testing.T) {
	sglang, err := Lookup("sglang")
	if err != nil {
		t.Fatal(err)
	}
	vllm, err := Lookup("vllm")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec   *Spec
		title  string
		ranks  string // name=value, in the spec's order
		traced bool
		peer   string
	}{
		{sglang, "sglang::scheduler", "tp=0", true, ""},
		{sglang, "sglang::scheduler_TP0", "tp=0", true, ""},
		{sglang, "sglang::scheduler_TP1", "tp=1", false, "sglang::scheduler_TP0"},
		{sglang, "sglang::scheduler_DP2_TP3", "tp=3 dp=2", false, "sglang::scheduler_DP2_TP0"},
		{sglang, "sglang::scheduler_DP1_TP0", "tp=0 dp=1", true, ""},
		{sglang, "sglang::scheduler_DP0_PP1_TP2_EP0", "tp=2 dp=0 pp=1", false, "sglang::scheduler_DP0_PP1_TP0_EP0"},
		{sglang, "sglang::scheduler_DP1", "tp=0 dp=1", true, ""},
		{sglang, "sglang::scheduler_PP1_ATTN_CP0_MOE_DP1_TP1_EP1", "tp=1 pp=1", false, "sglang::scheduler_PP1_ATTN_CP0_MOE_DP1_TP0_EP1"},
		{sglang, "sglang::scheduler_MOE_DP3_TP0", "tp=0", true, ""},                                           // MoE DP is no DP group
		{sglang, "sglang::scheduler_TP1 --model x_TP0", "tp=1", false, "sglang::scheduler_TP0 --model x_TP0"}, // the title, not what follows it
		{sglang, "python3 -m sglang.launch_server", "tp=0", true, ""},                                         // no scheduler's title: the spec's match decides
		{vllm, "VLLM::EngineCore", "tp=0", true, ""},
		{vllm, "VLLM::EngineCore_DP1", "tp=0 dp=1", true, ""},
		{vllm, "VLLM::Worker", "tp=0", true, ""},
		{vllm, "VLLM::Worker_TP0", "tp=0", true, ""},
		// vLLM's specs place their stages (process:): attaching rank 1 traces its server's rank 0.
		{vllm, "VLLM::Worker_TP1", "tp=1", true, ""},
		{vllm, "VLLM::Worker_DP1_PP0_PCP1_TP3_DCP1_EP7", "tp=3 dp=1", true, ""},
	} {
		t.Run(c.title, func(t *testing.T) {
			ranks, err := c.spec.Match.RanksOf(c.title)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range ranks {
				got = append(got, fmt.Sprintf("%s=%d", r.Rank.Name, r.Value))
			}
			if strings.Join(got, " ") != c.ranks {
				t.Errorf("ranks %v, want %s", got, c.ranks)
			}
			err = c.spec.CheckRank(c.title)
			var other *OtherRankError
			if traced := err == nil; traced != c.traced || (err != nil && !errors.As(err, &other)) {
				t.Errorf("CheckRank: %v, want traced %v", err, c.traced)
			}
			if p := c.spec.PeerTitle(c.title); p != c.peer {
				t.Errorf("PeerTitle %q, want %q", p, c.peer)
			}
		})
	}
	want := `"sglang::scheduler_TP1" is tp rank 1, and spec sglang traces tp rank 0 only`
	if err := sglang.CheckRank("sglang::scheduler_TP1"); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("%v, want %s", err, want)
	}
	if err := sglang.CheckRank("sglang::scheduler_TP99999999"); err == nil || !strings.Contains(err.Error(), `tp rank "99999999" is not a rank`) {
		t.Errorf("an unreadable rank: %v", err)
	}
}

// Detect refuses a process of another rank (unless AnyRank), with the spec
// it matched; the daemon and attach both go through it.
func TestDetectRank(t *testing.T) {
	cat, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	ngram := func(m string) bool { return m == "sglang.srt.speculative.ngram_worker" }
	p := Process{Exe: "python3", Cmdline: "sglang::scheduler_TP1", Title: "sglang::scheduler_TP1", HasModule: ngram, RequireModule: true}
	s, err := Detect(cat, p)
	var other *OtherRankError
	if s != nil || !errors.As(err, &other) || other.Spec.Engine != "sglang-ngram" || other.Rank.Value != 1 {
		t.Errorf("rank 1: %v %v", s, err)
	}
	p.AnyRank = true
	if s, err := Detect(cat, p); err != nil || s == nil || s.Engine != "sglang-ngram" {
		t.Errorf("rank 1, any rank: %v %v", s, err)
	}
	p.AnyRank, p.Title, p.Cmdline = false, "sglang::scheduler_TP0", "sglang::scheduler_TP0"
	if s, err := Detect(cat, p); err != nil || s == nil || s.Engine != "sglang-ngram" {
		t.Errorf("rank 0: %v %v", s, err)
	}
}

func TestParseRanks(t *testing.T) {
	s, err := Parse("r.yaml", []byte(`engine: e
match:
  ranks:
    tp: {title: '_TP([0-9]+)', default: 0, only: 0, attribute: e.tp_rank}
    dp: {title: '_DP([0-9]+)'}
stages:
  verify: {module: m, qualname: f}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := s.Match.Ranks
	if len(r) != 2 || r[0].Name != "tp" || *r[0].Only != 0 || *r[0].Default != 0 || r[0].Attribute != "e.tp_rank" || r[1].Name != "dp" || r[1].Only != nil || r[1].Attribute != "" || r[0].Line != 4 {
		t.Errorf("ranks %+v %+v", r[0], r[1])
	}
	for _, c := range []struct{ ranks, want string }{
		{"[tp]", "r.yaml:3: match.ranks: expected a mapping of rank name"},
		{"{TP: {title: 'x(1)'}}", `r.yaml:3: match.ranks: "TP" is not a rank name`},
		{"{tp: {only: 0}}", "r.yaml:3: match.ranks.tp: missing title"},
		{"{tp: {title: '_TP[0-9]+'}}", `r.yaml:3: match.ranks.tp.title: "_TP[0-9]+" has 0 groups; the rank is its one group`},
		{"{tp: {title: '(_)TP([0-9]+)'}}", "has 2 groups"},
		{"{tp: {title: '_TP([0-9]+'}}", "r.yaml:3: match.ranks.tp.title: error parsing regexp"},
		{"{tp: {title: '_TP([0-9]+)', only: -1}}", "r.yaml:3: match.ranks.tp.only: -1 is not a rank (0 to 65535)"},
		{"{tp: {title: '_TP([0-9]+)', default: x}}", "r.yaml:3: match.ranks.tp.default: expected an integer"},
		{"{tp: {title: '_TP([0-9]+)', attribute: 'a b'}}", `r.yaml:3: match.ranks.tp.attribute: "a b" is not an attribute name`},
		{"{tp: {title: '_TP([0-9]+)', step: 1}}", `r.yaml:3: match.ranks.tp: unknown key "step"`},
		{"{a: {title: '(1)'}, b: {title: '(1)'}, c: {title: '(1)'}, d: {title: '(1)'}, e: {title: '(1)'}}", "r.yaml:3: match.ranks: 5 ranks, at most 4"},
		{"{tp: {title: '" + strings.Repeat("x", 600) + "(1)'}}", "a pattern of 603 bytes, at most 512"},
	} {
		_, err := Parse("r.yaml", []byte("engine: e\nmatch:\n  ranks: "+c.ranks+"\nstages:\n  verify: {module: m, qualname: f}\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\n want %s", c.ranks, err, c.want)
		}
	}
}

// Every resource attribute the catalog's ranks go under is in the span
// contract (spanschema.RankKeys, docs/spans.md).
func TestCatalogRankKeys(t *testing.T) {
	cat, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cat {
		for _, r := range s.Match.Ranks {
			if r.Attribute != "" && !slices.Contains(spanschema.RankKeys, attribute.Key(r.Attribute)) {
				t.Errorf("%s: rank %s goes under %s, which spanschema.RankKeys lacks", s.File, r.Name, r.Attribute)
			}
		}
	}
}
