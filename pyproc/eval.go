package pyproc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// step is one path component.
type step struct {
	attr  string // .name; "" for an index
	index int    // [n] (negative counts from the end, as in Python)
	all   bool   // [*]
	key   string // ["k"]: a str key of a dict
	isKey bool
	text  string // as written, for messages
}

// parsePath splits "reqs[*].rid", "x.y[2].z", "[-1]", `meta["k"]`.
func parsePath(path string) ([]step, error) {
	var out []step
	for i := 0; i < len(path); {
		switch c := path[i]; {
		case c == '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("path %q: unclosed [", path)
			}
			in := path[i+1 : i+j]
			s := step{text: path[i : i+j+1]}
			switch {
			case in == "*":
				s.all = true
			case len(in) >= 2 && (in[0] == '"' || in[0] == '\'') && in[len(in)-1] == in[0]:
				s.key, s.isKey = in[1:len(in)-1], true
			default:
				n, err := strconv.Atoi(in)
				if err != nil {
					return nil, fmt.Errorf("path %q: bad index %q (want a number, * or a quoted key)", path, in)
				}
				s.index = n
			}
			out = append(out, s)
			i += j + 1
		case c == '.' && i > 0 || isIdentStart(c):
			if c == '.' {
				i++
			}
			j := i
			for j < len(path) && (isIdentStart(path[j]) || path[j] >= '0' && path[j] <= '9') {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("path %q: empty attribute name at offset %d", path, i)
			}
			out = append(out, step{attr: path[i:j], text: "." + path[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("path %q: unexpected %q at offset %d", path, c, i)
		}
	}
	return out, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// PathError says which component of an Eval path failed and on what.
type PathError struct {
	Path string // the path up to and including the failing component; [*] shows the item's index
	Type string // type of the object the component met ("" if unreadable)
	Err  error
}

func (e *PathError) Error() string {
	path := e.Path
	if path == "" {
		path = "(start)"
	}
	if e.Type == "" {
		return fmt.Sprintf("%s: %v", path, e.Err)
	}
	return fmt.Sprintf("%s: on a %s: %v", path, e.Type, e.Err)
}

func (e *PathError) Unwrap() error { return e.Err }

// evaluator is one Eval. What it learns of types goes to tc, which the
// Process keeps (checked again in each Eval: typecache.go); the entry
// indices of names in keys that are no type's shared keys last one Eval.
type evaluator struct {
	p      *Process
	tc     *typeCache
	shared map[sharedKey]int64 // entry index of a name in split keys
	visits int
	nest   int   // lists being converted, one in another
	hint   block // the bytes around the object attr last looked at
}

// errTooMany is the error past maxVisits.
var errTooMany = fmt.Errorf("more than %d objects read", maxVisits)

type sharedKey struct {
	keys uint64
	name string
}

func (e *evaluator) visit(where string) error {
	if e.visits++; e.visits > maxVisits {
		return &PathError{Path: where, Err: errTooMany}
	}
	return nil
}

// fail wraps err with the path, unless it already is a PathError.
func (e *evaluator) fail(where, typ string, err error) error {
	var pe *PathError
	if errors.As(err, &pe) {
		return err
	}
	return &PathError{Path: where, Type: typ, Err: err}
}

// Eval reads path from obj: attributes (.name, instance dicts, managed
// dicts and inline values, __slots__, class attributes, module globals),
// list and tuple items ([n], [-1], [*] for all), str keys of dicts (["k"]),
// a dict's keys in insertion order ([*]).
// The result converts to scalars where it can (see Value). Every read is
// bounded and every pointer checked, so a structure that changes while we
// read gives an error or a wrong value, never a hang; consistency is the
// caller's business (read while the owning call is known to run).
//
// Eval reads a whole batch level by level: at each step of the path, the
// objects every item has reached are read together, in one vectored read
// (two or three where a step needs a header first), so a [*] over 256
// requests costs about as many system calls as over one. The result and
// the error are those of reading item by item (EvalItemByItem): the error
// is that of the first item that fails.
func (p *Process) Eval(obj uint64, path string) (Value, error) {
	steps, err := parsePath(path)
	if err != nil {
		return nil, err
	}
	if p.cache == nil {
		p.cache = newTypeCache()
	}
	v, err := p.newEvaluator(p.cache).batch(obj, steps)
	if errors.Is(err, errTooMany) {
		// Past the bound the batch has counted other objects than the
		// item walk would have: let the walk say where it stops.
		return p.newEvaluator(p.cache).eval(obj, steps, "")
	}
	return v, err
}

// EvalItemByItem is Eval reading one object at a time, one read per
// header or field, with nothing kept from earlier calls: the way Eval read
// before it read in batches, kept to compare with (bench/pyread, tests).
func (p *Process) EvalItemByItem(obj uint64, path string) (Value, error) {
	steps, err := parsePath(path)
	if err != nil {
		return nil, err
	}
	return p.newEvaluator(newTypeCache()).eval(obj, steps, "")
}

func (p *Process) newEvaluator(tc *typeCache) *evaluator {
	tc.gen++
	p.arena.off = 0 // the last Eval's reads are done with
	return &evaluator{p: p, tc: tc, shared: map[sharedKey]int64{}}
}

func (e *evaluator) eval(obj uint64, steps []step, where string) (Value, error) {
	for i, s := range steps {
		if err := e.visit(where); err != nil {
			return nil, err
		}
		if s.all {
			items, _, err := e.items(obj, where+s.text)
			if err != nil {
				return nil, err
			}
			out := make([]Value, len(items))
			for j, it := range items {
				if out[j], err = e.eval(it, steps[i+1:], fmt.Sprintf("%s[%d]", where, j)); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		next := where + s.text
		if where == "" && s.attr != "" {
			next = s.attr // no leading dot on the first name
		}
		var err error
		switch {
		case s.attr != "":
			obj, err = e.attr(obj, s.attr, next)
		case s.isKey:
			obj, err = e.key(obj, s.key, next)
		default:
			obj, err = e.index(obj, s.index, next)
		}
		if err != nil {
			return nil, err
		}
		where = next
	}
	return e.value(obj, where)
}

func (e *evaluator) index(obj uint64, i int, where string) (uint64, error) {
	items, typ, err := e.items(obj, where)
	if err != nil {
		return 0, err
	}
	if typ == "dict" {
		return 0, e.fail(where, typ, fmt.Errorf(`a dict takes ["key"] or [*] (its keys), not [%d]`, i))
	}
	j := i
	if j < 0 {
		j += len(items)
	}
	if j < 0 || j >= len(items) {
		return 0, e.fail(where, typ, fmt.Errorf("index %d out of range (%d items)", i, len(items)))
	}
	return items[j], nil
}

func (e *evaluator) key(obj uint64, k, where string) (uint64, error) {
	t, err := e.p.typeOf(obj)
	if err != nil {
		return 0, e.fail(where, "", err)
	}
	ti, err := e.typeInfo(t)
	if err != nil {
		return 0, e.fail(where, "", err)
	}
	if t != e.p.types.dict && ti.flags&flagDictSubclass == 0 {
		return 0, e.fail(where, e.typeName(ti), fmt.Errorf("not a dict: [%q] needs one", k))
	}
	v, ok, err := e.p.dictGet(obj, k)
	if err != nil {
		return 0, e.fail(where, e.typeName(ti), err)
	}
	if !ok {
		keys, _ := e.p.dictKeys(obj, maxNearKeys)
		return 0, e.fail(where, e.typeName(ti), nearErr(fmt.Sprintf("no key %q", k), k, keys))
	}
	return v, nil
}

func nearErr(msg, want string, have []string) error {
	if near := nearNames(want, have, 8); len(near) > 0 {
		msg += "; near: " + strings.Join(near, ", ")
	}
	return errors.New(msg)
}
