package pyproc

import "fmt"

// HasModule tells whether sys.modules holds a module of that name: a way to
// recognise an engine (and which of its workers it imported) from the
// process itself.
func (p *Process) HasModule(name string) (bool, error) {
	interp, err := p.mainInterp()
	if err != nil {
		return false, err
	}
	modules, err := p.m.ptr(interp + p.layout.InterpModules)
	if err != nil {
		return false, fmt.Errorf("reading sys.modules: %w", err)
	}
	_, ok, err := p.dictGet(modules, name)
	return ok, err
}
