package pyproc

import (
	"debug/elf"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/safefile"
)

// Bounds on what a process's maps can make findInterpreter do: the
// mappings kept (a real interpreter maps its file 4 to 6 times) and the
// files opened.
const (
	maxInterpMaps  = 256
	maxInterpFiles = 4
)

// interpMaps lists the mappings of the files that may hold the interpreter:
// libpython, and the executable. Only those are kept: a process may map
// tens of thousands of other files.
func interpMaps(pid int, exe string) ([]procfs.Map, error) {
	var out []procfs.Map
	err := procfs.Maps(pid, func(m procfs.Map) bool {
		base := filepath.Base(m.Path)
		if m.IsFile() && (libRe.MatchString(base) || m.Path == exe || exeRe.MatchString(base)) {
			out = append(out, m)
		}
		return len(out) < maxInterpMaps
	})
	return out, err
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
	exe := procfs.Exe(pid)
	maps, err := interpMaps(pid, exe)
	if err != nil {
		return nil, err
	}
	var libs, rest []procfs.Map
	seen := map[string]bool{}
	for _, m := range maps {
		if seen[m.Path] {
			continue
		}
		seen[m.Path] = true
		base := filepath.Base(m.Path)
		switch {
		case libRe.MatchString(base):
			libs = append(libs, m)
		case m.Path == exe || exeRe.MatchString(base):
			rest = append(rest, m)
		}
	}
	var tried []string
	var hostile error
	files := append(libs, rest...)
	for _, m := range files[:min(len(files), maxInterpFiles)] {
		b, err := loadBinary(pid, m, maps)
		if err != nil {
			tried = append(tried, err.Error())
			for _, e := range []error{elfsym.ErrInvalid, safefile.ErrSymlink} {
				if errors.Is(err, e) && hostile == nil {
					hostile = e
				}
			}
			continue
		}
		return b, nil
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("pid %d (%s) is not a CPython process: it maps no libpython and no python executable", pid, exe)
	}
	err = fmt.Errorf("pid %d (%s) is not a CPython process: no _PyRuntime found; tried %s", pid, exe, strings.Join(tried, "; "))
	if hostile != nil {
		// A forged file or a swapped path stays so: say it to callers
		// deciding whether to look again.
		err = fmt.Errorf("%w (%w)", err, hostile)
	}
	return nil, err
}

func loadBinary(pid int, m procfs.Map, maps []procfs.Map) (*interpBinary, error) {
	// Through the target's root so paths inside containers resolve.
	file, err := procfs.OpenMapped(pid, m)
	if err != nil {
		return nil, err
	}
	f, err := elfsym.Open(file, m.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, name := range wantSyms {
		want[name] = true
	}
	// .dynsym exports _PyRuntime and the types where a build has them, and
	// wins; .symtab (when not stripped) has the rest.
	syms := map[string]uint64{}
	err = f.Symbols(func(s elf.Symbol, dynamic bool) bool {
		if want[s.Name] && s.Value != 0 && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
			if _, dup := syms[s.Name]; !dup || dynamic {
				syms[s.Name] = s.Value
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if _, ok := syms["_PyRuntime"]; !ok {
		return nil, fmt.Errorf("%s: no _PyRuntime symbol", m.Path)
	}
	bias, err := loadBias(f.File, m.Path, maps)
	if err != nil {
		return nil, err
	}
	b := &interpBinary{path: m.Path, bias: bias, syms: map[string]uint64{}, isLib: f.Type == elf.ET_DYN}
	for name, v := range syms {
		b.syms[name] = v + bias
	}
	return b, nil
}

// loadBias is where the file's first PT_LOAD landed minus where it asked to
// be: 0 for a non-PIE executable, the mmap base for a shared library.
func loadBias(f *elf.File, path string, maps []procfs.Map) (uint64, error) {
	if f.Type == elf.ET_EXEC {
		return 0, nil
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		pageOff := p.Off &^ 0xfff
		for _, m := range maps {
			if m.Path == path && m.Offset == pageOff {
				return m.Start - (p.Vaddr &^ 0xfff), nil
			}
		}
		break
	}
	return 0, fmt.Errorf("no mapping of the first PT_LOAD of %s", path)
}
