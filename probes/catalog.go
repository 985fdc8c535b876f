package probes

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed catalog/*.yaml
var catalogFS embed.FS

// Catalog returns every spec that ships with specprobe, sorted by engine name.
func Catalog() ([]*Spec, error) {
	entries, err := catalogFS.ReadDir("catalog")
	if err != nil {
		return nil, err
	}
	var specs []*Spec
	for _, e := range entries {
		s, err := parseCatalogFile(e.Name())
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Engine < specs[j].Engine })
	return specs, nil
}

// CatalogSource returns the YAML text of a catalog spec, for `probes show`.
func CatalogSource(engine string) ([]byte, error) {
	s, err := Lookup(engine)
	if err != nil {
		return nil, err
	}
	return catalogFS.ReadFile(path.Join("catalog", strings.TrimPrefix(s.File, "catalog:")))
}

// Lookup finds a catalog spec by engine name.
func Lookup(engine string) (*Spec, error) {
	specs, err := Catalog()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range specs {
		if s.Engine == engine {
			return s, nil
		}
		names = append(names, s.Engine)
	}
	return nil, fmt.Errorf("no engine %q in the catalog (have: %s; or pass your own spec with --probes FILE)", engine, strings.Join(names, ", "))
}

func parseCatalogFile(name string) (*Spec, error) {
	data, err := catalogFS.ReadFile(path.Join("catalog", name))
	if err != nil {
		return nil, err
	}
	s, err := Parse("catalog:"+name, data)
	if err != nil {
		return nil, fmt.Errorf("bundled spec is broken: %w", err)
	}
	return s, nil
}
