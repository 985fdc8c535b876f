package pyproc

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

type mapping struct {
	start, off uint64
	path       string
}

func readMaps(pid int) ([]mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		rng := strings.SplitN(fields[0], "-", 2)
		start, err1 := strconv.ParseUint(rng[0], 16, 64)
		off, err2 := strconv.ParseUint(fields[2], 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		path := strings.Join(fields[5:], " ")
		path = strings.TrimSuffix(path, " (deleted)")
		out = append(out, mapping{start: start, off: off, path: path})
	}
	return out, sc.Err()
}

// The ABI flags matter: "t" marks a free-threaded build (Py_GIL_DISABLED).
var (
	libRe = regexp.MustCompile(`^libpython(\d+)\.(\d+)([a-z]*)\.so`)
	exeRe = regexp.MustCompile(`^python(\d+)\.(\d+)([a-z]*)$`)
)

// nameVersion reads the version and ABI flags out of a file name.
func nameVersion(path string) (v Version, flags string, ok bool) {
	base := filepath.Base(path)
	m := libRe.FindStringSubmatch(base)
	if m == nil {
		m = exeRe.FindStringSubmatch(base)
	}
	if m == nil {
		return Version{}, "", false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return Version{major, minor, -1}, m[3], true
}

// interpBinary is the file holding the interpreter, as the target maps it.
type interpBinary struct {
	path  string // as in /proc/PID/maps
	bias  uint64
	syms  map[string]uint64 // already biased
	isLib bool
}

// wantSyms are the data symbols pyproc reads: the runtime, the hash key, the
// version, and the type objects it compares ob_type against.
var wantSyms = []string{
	"_PyRuntime", "_Py_HashSecret", "Py_Version",
	"PyUnicode_Type", "PyDict_Type", "PyModule_Type", "PyFunction_Type", "PyType_Type",
	"PyStaticMethod_Type", "PyClassMethod_Type", "PyProperty_Type", "PyMethod_Type",
	"PyCode_Type", "PyTuple_Type",
	// Eval's scalars and descriptors, Local's cells.
	"PyList_Type", "PyLong_Type", "PyBool_Type", "PyFloat_Type", "_Py_NoneStruct",
	"PyMemberDescr_Type", "PyGetSetDescr_Type", "PyCell_Type", "PyBytes_Type", "PyBaseObject_Type",
}

// findInterpreter looks for the file that defines _PyRuntime among the
// target's file mappings: libpython first (pyenv, most distros' shared
// builds), then the executable (Debian's static python3.11 is non-PIE with
// libpython inside).
func findInterpreter(pid int) (*interpBinary, error) {
	maps, err := readMaps(pid)
	if err != nil {
		return nil, err
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	exe = strings.TrimSuffix(exe, " (deleted)")
	var libs, rest []string
	seen := map[string]bool{}
	for _, m := range maps {
		if seen[m.path] {
			continue
		}
		seen[m.path] = true
		base := filepath.Base(m.path)
		switch {
		case libRe.MatchString(base):
			libs = append(libs, m.path)
		case m.path == exe || exeRe.MatchString(base):
			rest = append(rest, m.path)
		}
	}
	var tried []string
	for _, path := range append(libs, rest...) {
		b, err := loadBinary(pid, path, maps)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", path, err))
			continue
		}
		return b, nil
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("pid %d (%s) is not a CPython process: it maps no libpython and no python executable", pid, exe)
	}
	return nil, fmt.Errorf("pid %d (%s) is not a CPython process: no _PyRuntime found; tried %s", pid, exe, strings.Join(tried, "; "))
}

func loadBinary(pid int, path string, maps []mapping) (*interpBinary, error) {
	// Through the target's root so paths inside containers resolve.
	f, err := elf.Open(fmt.Sprintf("/proc/%d/root%s", pid, path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms := map[string]uint64{}
	collect := func(list []elf.Symbol) {
		for _, s := range list {
			if s.Value != 0 && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
				syms[s.Name] = s.Value
			}
		}
	}
	if ds, err := f.DynamicSymbols(); err == nil {
		collect(ds)
	}
	if _, ok := syms["_PyRuntime"]; !ok {
		if ss, err := f.Symbols(); err == nil {
			collect(ss)
		}
	}
	if _, ok := syms["_PyRuntime"]; !ok {
		return nil, errors.New("no _PyRuntime symbol")
	}
	bias, err := loadBias(f, path, maps)
	if err != nil {
		return nil, err
	}
	b := &interpBinary{path: path, bias: bias, syms: map[string]uint64{}, isLib: f.Type == elf.ET_DYN}
	for _, name := range wantSyms {
		if v, ok := syms[name]; ok {
			b.syms[name] = v + bias
		}
	}
	return b, nil
}

// loadBias is where the file's first PT_LOAD landed minus where it asked to
// be: 0 for a non-PIE executable, the mmap base for a shared library.
func loadBias(f *elf.File, path string, maps []mapping) (uint64, error) {
	if f.Type == elf.ET_EXEC {
		return 0, nil
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		pageOff := p.Off &^ 0xfff
		for _, m := range maps {
			if m.path == path && m.off == pageOff {
				return m.start - (p.Vaddr &^ 0xfff), nil
			}
		}
		break
	}
	return 0, fmt.Errorf("no mapping of the first PT_LOAD of %s", path)
}
