/* Prints, for the CPython whose headers it is compiled against, the offsets
 * pyproc's tables (layout.go) hold: offsetof in the interpreter's own structs.
 * TestLayoutMatchesHeaders builds and runs it for every interpreter with
 * headers here; docs/design.md ("Re-deriving the offsets") says how to use it
 * by hand for a new version. Build: gcc -I<prefix>/include/python3.X offsets.c
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_frame.h"
#include "internal/pycore_moduleobject.h"
#endif

#define P(name, value) printf("%s %ld\n", name, (long)(value))
#define OFF(name, type, field) P(name, offsetof(type, field))

int main(void) {
	OFF("InterpretersHead", _PyRuntimeState, interpreters.head);
	OFF("InterpNext", PyInterpreterState, next);
	OFF("TstateNext", PyThreadState, next);
	OFF("TstateThreadID", PyThreadState, thread_id);
#if PY_MINOR_VERSION == 10
	OFF("InterpModules", PyInterpreterState, modules);
	OFF("InterpThreadsHead", PyInterpreterState, tstate_head);
	P("TstateNativeThreadID", 0);
	OFF("TstateExc", PyThreadState, curexc_type);
	OFF("TstateFrame", PyThreadState, frame);
	P("CFrameCurrent", -1);
	OFF("FrameCode", PyFrameObject, f_code);
	OFF("FramePrevious", PyFrameObject, f_back);
	OFF("FrameLocalsplus", PyFrameObject, f_localsplus);
	P("CodeQualname", 0);
	OFF("CodeLocalsNames", PyCodeObject, co_varnames);
	P("CodeLocalsKinds", 0);
	OFF("CodeNLocals", PyCodeObject, co_nlocals);
	OFF("CodeCellvars", PyCodeObject, co_cellvars);
	OFF("CodeFreevars", PyCodeObject, co_freevars);
	OFF("LongDigits", PyLongObject, ob_digit);
#else
#if PY_MINOR_VERSION == 11
	OFF("InterpModules", PyInterpreterState, modules);
	OFF("TstateExc", PyThreadState, curexc_type);
#else
	OFF("InterpModules", PyInterpreterState, imports.modules);
	OFF("TstateExc", PyThreadState, current_exception);
#endif
	OFF("InterpThreadsHead", PyInterpreterState, threads.head);
	OFF("TstateNativeThreadID", PyThreadState, native_thread_id);
	OFF("TstateFrame", PyThreadState, cframe);
	OFF("CFrameCurrent", _PyCFrame, current_frame);
	OFF("FrameCode", _PyInterpreterFrame, f_code);
	OFF("FramePrevious", _PyInterpreterFrame, previous);
	OFF("FrameLocalsplus", _PyInterpreterFrame, localsplus);
	OFF("CodeQualname", PyCodeObject, co_qualname);
	OFF("CodeLocalsNames", PyCodeObject, co_localsplusnames);
	OFF("CodeLocalsKinds", PyCodeObject, co_localspluskinds);
	OFF("ModuleDict", PyModuleObject, md_dict);
#if PY_MINOR_VERSION == 11
	OFF("LongDigits", PyLongObject, ob_digit);
#else
	OFF("LongSize", PyLongObject, long_value.lv_tag);
	OFF("LongDigits", PyLongObject, long_value.ob_digit);
#endif
#endif
	P("ASCIIData", sizeof(PyASCIIObject));
	P("CompactData", sizeof(PyCompactUnicodeObject));
	OFF("UnicodeLength", PyASCIIObject, length);
	OFF("UnicodeHash", PyASCIIObject, hash);
	OFF("UnicodeState", PyASCIIObject, state);
	OFF("DictUsed", PyDictObject, ma_used);
	OFF("DictVersion", PyDictObject, ma_version_tag);
	OFF("DictKeys", PyDictObject, ma_keys);
	OFF("DictValues", PyDictObject, ma_values);
	OFF("TypeName", PyTypeObject, tp_name);
	OFF("TypeBasicSize", PyTypeObject, tp_basicsize);
	OFF("TypeFlags", PyTypeObject, tp_flags);
	OFF("TypeDict", PyTypeObject, tp_dict);
	OFF("TypeDictOffset", PyTypeObject, tp_dictoffset);
	OFF("TypeMro", PyTypeObject, tp_mro);
	OFF("TypeCachedKeys", PyHeapTypeObject, ht_cached_keys);
	OFF("FuncName", PyFunctionObject, func_name);
	OFF("FuncQualname", PyFunctionObject, func_qualname);
	OFF("FuncCode", PyFunctionObject, func_code);
	OFF("FuncDict", PyFunctionObject, func_dict);
	OFF("FuncDefaults", PyFunctionObject, func_defaults);
	OFF("FuncKwDefaults", PyFunctionObject, func_kwdefaults);
	OFF("TupleItems", PyTupleObject, ob_item);
	OFF("TupleSize", PyVarObject, ob_size);
	OFF("ListItems", PyListObject, ob_item);
	OFF("ListSize", PyVarObject, ob_size);
	OFF("FloatValue", PyFloatObject, ob_fval);
	OFF("BytesData", PyBytesObject, ob_sval);
	OFF("CellRef", PyCellObject, ob_ref);
	OFF("MemberDescrDef", PyMemberDescrObject, d_member);
	OFF("MemberDefType", PyMemberDef, type);
	OFF("MemberDefOffset", PyMemberDef, offset);
	OFF("CodeFlags", PyCodeObject, co_flags);
	OFF("CodeArgcount", PyCodeObject, co_argcount);
	OFF("CodeKwOnlyArgcount", PyCodeObject, co_kwonlyargcount);
	OFF("CodePosOnlyArgcount", PyCodeObject, co_posonlyargcount);
	OFF("CodeFilename", PyCodeObject, co_filename);
	OFF("CodeName", PyCodeObject, co_name);
	OFF("CodeFirstLine", PyCodeObject, co_firstlineno);
	return 0;
}
