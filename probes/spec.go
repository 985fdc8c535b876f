// Package probes holds the probe-spec format and the catalog of specs that ship
// with specprobe. A spec is data: where an engine's stages live and what to read
// there (docs/probe-spec.md). Nothing here touches the kernel.
package probes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/specprobe/specprobe/spanschema"
)

// Stage names, in the order a decode step runs them (the span contract's).
const (
	Draft       = spanschema.Draft
	Verify      = spanschema.Verify
	Accept      = spanschema.Accept
	DraftExtend = spanschema.DraftExtend
)

// StageNames lists every stage a spec may describe.
var StageNames = spanschema.Stages

// RequestBoundary names, in Spec.Stages, the function each of whose calls is
// one request (transformers' generate()), for a spec whose stages name no
// request: it is armed like a stage and makes no span of its own.
const RequestBoundary = "request_boundary"

// ProbedStages are the stages in the order they are armed, then the
// request boundary.
var ProbedStages = append(slices.Clone(StageNames), RequestBoundary)

// Spec describes one engine.
type Spec struct {
	Engine      string
	Description string
	// Worker names the engine's variant the spec is for (SGLang's
	// speculative worker class), shown when the spec is detected.
	Worker string
	// SameBatch: every stage call of a decode step serves the same requests
	// (SGLang's draft, verify and draft-extend of one batch), so a Python
	// call whose requests could not be read serves those another call of
	// its step read. Not vLLM: its step's draft is for the next batch.
	SameBatch bool
	// ThreadLabel, when set, labels every traced thread's span with it,
	// as SGLang's tracing labels its scheduler thread "Scheduler"; such a
	// thread span always names a TP rank (0 where the title gives none).
	// Empty: each thread is labelled with its own name.
	ThreadLabel string
	// Root is how each request's root span is named (spanschema's styles:
	// sglang, vllm, llamacpp); SGLang's when the spec does not say.
	Root   spanschema.RootStyle
	Match  Match
	Stages map[string]*Stage
	// Fields, for a native spec whose derefs name struct fields: where
	// their offsets come from (fields.go).
	Fields *Fields
	File   string // where the spec came from, for messages
}

// Label is the engine's name with its worker, for messages: "sglang-ngram (NGRAMWorker)".
func (s *Spec) Label() string {
	if s.Worker == "" {
		return s.Engine
	}
	return s.Engine + " (" + s.Worker + ")"
}

// Match says how to recognise a process of this engine; any entry matching is enough.
type Match struct {
	Exe     []string
	Cmdline []string
	Library []string
	Module  []string // Python modules in the target's sys.modules
	// Priority orders detection: when several specs match a process, the
	// highest wins. An engine's variant (a worker whose module is imported
	// only when it runs) sets 1 to win over the engine's default spec.
	Priority int
	// Ranks read the process's parallelism ranks from its title: which
	// one is traced, and the resource attributes (ranks.go).
	Ranks []*Rank
}

// Scope says which requests one call of a stage serves.
type Scope string

const (
	ScopeRequest Scope = "request"
	ScopeBatch   Scope = "batch"
)

// Stage is one probed function.
type Stage struct {
	Name      string
	Binary    []string
	Symbol    string
	Scope     Scope
	RequestID *Value
	Values    map[string]*Value
	Line      int
	// Process names the processes of the server the stage runs in, by the
	// name in their titles (VLLM::Worker_TP0 is "Worker"), first preferred;
	// nil: the process attached (procgroup.Server.Place).
	Process []string

	// A Python stage is a function found by module and qualified name
	// instead of binary and symbol (docs/probe-spec.md, Python stages).
	Module   string
	Qualname string
	Requests *PyRequests
	// When, if set, keeps only the calls whose value at When is one of
	// When.Equals (NGRAM's forward_batch_generation verifies only on a
	// decode batch); read with the requests.
	When *PyCond
	// For a Python accept stage: read when it returns, from the frame of
	// ReadFrom (a function of the same module still running then), the
	// accepted count of each request, index-aligned with Requests.
	ReadFrom string
	Accepted *PyList
	// Drafted, for an accept stage, lists the requests that had drafts (a
	// list, or a dict keyed by request id): the others get no count, their
	// verify checked no draft (vLLM's prefill).
	Drafted *PyList
}

// PyCond compares the value at Path from the argument Arg with each of
// Equals (a str or an int, as written): the call is kept if any matches.
type PyCond struct {
	Arg, Path string
	Equals    []string
	ArgChoice *ArgChoice
	Line      int
}

// PyList is a list read from an argument of a Python frame.
type PyList struct {
	Arg       string
	ArgChoice *ArgChoice
	Path      string
	Len       bool  // each item's length instead of the item (vLLM: sampled tokens)
	Add       int64 // added to each count (-1: the bonus token)
	// Sub, for counts: one number read with them and taken from each, the
	// count then clamped at 0 (vLLM's max(len(sampled) -
	// num_sampled_tokens_per_step, 0), whose second term is the run's).
	Sub  *PyList
	Line int
}

// Count is the accepted count of an item read as n (or its length): n plus
// Add, less sub where the spec reads one, never below 0 then.
func (l *PyList) Count(n, sub int64) int64 {
	n += l.Add
	if l.Sub != nil {
		n = max(n-sub, 0)
	}
	return n
}

// ReturnArg names a stage's return value where a spec names an argument.
const ReturnArg = "return"

// ArgChoice is an argument given other than by one name, so that a spec
// survives a rename: the first of Names the function has (arg: [batch,
// model_worker_batch]), or the argument at Position of its signature (arg:
// 1; 0 is self for a method). It is resolved at attach against the
// function's code object (loader), which sets the read's Arg to the name
// chosen; until then Arg is "".
type ArgChoice struct {
	Names    []string
	Position int // when Names is empty
}

// String is the choice as a spec writes it.
func (c *ArgChoice) String() string {
	if len(c.Names) == 0 {
		return fmt.Sprintf("argument %d", c.Position)
	}
	return "[" + strings.Join(c.Names, ", ") + "]"
}

// IsPython tells a Python stage from a native one.
func (s *Stage) IsPython() bool { return s.Module != "" }

// BoundaryName is, for the request boundary, the name its requests' ids
// start with (its qualname or symbol as the spec writes it); "" for a stage.
func (s *Stage) BoundaryName() string {
	switch {
	case s.Name != RequestBoundary:
		return ""
	case s.IsPython():
		return s.Qualname
	}
	return s.Symbol
}

// NamesRequests tells whether a stage of the spec names the requests its
// calls serve (request_id, requests). A spec that names none traces one
// request per thread's stream of steps, or per call of its request boundary.
func (s *Spec) NamesRequests() bool {
	for _, st := range s.Stages {
		if st.RequestID != nil || st.Requests != nil {
			return true
		}
	}
	return false
}

// PyRequests says where a Python stage call's requests are: the list at Path
// from the argument Arg, each request's id at ID (read while the call runs).
// A path that ends in a single str or int names one request.
type PyRequests struct {
	Arg       string
	ArgChoice *ArgChoice // Arg given as a list of names or a position
	// Path is "" when the argument itself holds the requests.
	Path string
	// ID is the id's path in each item; "" when the items are the ids
	// (a list of str, or a dict keyed by request id).
	ID   string
	Line int
}

// Boundary is the moment of a call at which a value is read.
type Boundary uint8

const (
	Entry Boundary = 0
	Exit  Boundary = 1
)

func (b Boundary) String() string {
	if b == Exit {
		return "exit"
	}
	return "entry"
}

// Source is the register a value starts from: argument 0-5 or the return value.
type Source uint8

const SourceRet Source = 6

func (s Source) String() string {
	if s == SourceRet {
		return "ret"
	}
	return fmt.Sprintf("arg%d", s)
}

// ValueType says how the final address or integer is interpreted.
type ValueType uint8

const (
	TypeInt ValueType = iota
	TypeString
	TypeVectorLen
)

var typeNames = map[string]ValueType{"int": TypeInt, "string": TypeString, "vector_len": TypeVectorLen}

// Value is one thing read at a stage boundary.
type Value struct {
	At    Boundary
	From  Source
	Deref []int64
	// DerefExpr, when a deref names fields, holds each offset as written
	// (nil entries are plain integers); the loader sets Deref from it at
	// attach, on a copy of the stage (Resolved).
	DerefExpr []*OffsetExpr
	Type      ValueType
	Size      int // bytes, for TypeInt
	ElemSize  int // for TypeVectorLen
	Add       int64
	// Check, when set, is what a value read must satisfy for the offsets
	// to be believed (checks.go); Origin says, once resolved, where each
	// deref offset came from, for its errors.
	Check  *ValueCheck
	Origin string
	Line   int
}

// Limits shared with the BPF program (bpf/stage.c).
const (
	MaxValues = 4
	MaxDeref  = 3
)

// Convert turns the raw 64-bit word the BPF program read into the value's integer.
func (v *Value) Convert(raw uint64) int64 {
	var x int64
	switch {
	case v.Type != TypeInt || v.Size == 8:
		x = int64(raw)
	case v.Size == 4:
		x = int64(int32(raw))
	case v.Size == 2:
		x = int64(int16(raw))
	default:
		x = int64(int8(raw))
	}
	return x + v.Add
}

// Boundaries returns, for entry and exit, the named values the probe must read
// there in a fixed order; the request id is named "" .
func (s *Stage) Boundaries() [2][]Named {
	var out [2][]Named
	if s.RequestID != nil {
		out[s.RequestID.At] = append(out[s.RequestID.At], Named{"", s.RequestID})
	}
	for _, name := range sortedKeys(s.Values) {
		v := s.Values[name]
		out[v.At] = append(out[v.At], Named{name, v})
	}
	return out
}

// Named pairs a value with its attribute name.
type Named struct {
	Name  string
	Value *Value
}

// IDPath is the path from the argument to the request ids.
func (r *PyRequests) IDPath() string {
	if r.ID == "" || r.Path == "" {
		return r.Path + r.ID
	}
	return r.Path + "." + r.ID
}
