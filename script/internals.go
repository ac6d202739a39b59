package script

import (
	"reflect"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// Three things gopher-lua keeps to itself that the engine needs: the pc
// of a call frame (to word runtime errors as Lua 5.1 does, luamsg.go),
// the value stack of a state (to measure a run's memory, memwalk.go) and
// the keys a table has had (to iterate it in Lua 5.1's order,
// luaorder.go). They are read through reflection, the slices with unsafe,
// from the fields of gopher-lua v1.1.2 (Debug.frame.Pc, LState.reg.array,
// LState.reg.top, LTable.keys); TestInternals fails if a new version
// renames them, and without them the engine falls back to what gopher-lua
// exports (errors keep gopher-lua's wording; the memory walk sees the
// named locals of the innermost frames only; dead keys are not replayed).

// framePc reads dbg.frame.Pc: the index of the instruction after the one
// the frame executes.
func framePc(dbg *lua.Debug) (pc int, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	frame := reflect.ValueOf(dbg).Elem().FieldByName("frame")
	if !frame.IsValid() || frame.Kind() != reflect.Ptr || frame.IsNil() {
		return 0, false
	}
	p := frame.Elem().FieldByName("Pc")
	if !p.IsValid() || p.Kind() != reflect.Int {
		return 0, false
	}
	return int(p.Int()), true
}

var lvalueType = reflect.TypeOf((*lua.LValue)(nil)).Elem()

// registryValues returns L's value stack up to its top: the registers of
// every frame. The slice is L's; it is read, never kept.
func registryValues(L *lua.LState) (vals []lua.LValue, ok bool) {
	defer func() {
		if recover() != nil {
			vals, ok = nil, false
		}
	}()
	reg := reflect.ValueOf(L).Elem().FieldByName("reg")
	if !reg.IsValid() || reg.Kind() != reflect.Ptr || reg.IsNil() {
		return nil, false
	}
	arr, top := reg.Elem().FieldByName("array"), reg.Elem().FieldByName("top")
	if !arr.IsValid() || arr.Kind() != reflect.Slice || arr.Type().Elem() != lvalueType ||
		!top.IsValid() || top.Kind() != reflect.Int {
		return nil, false
	}
	all := *(*[]lua.LValue)(unsafe.Pointer(arr.UnsafeAddr()))
	n := int(top.Int())
	if n < 0 || n > len(all) {
		return nil, false
	}
	return all[:n], true
}

// tableKeys returns the keys of t's hash part in the order they were
// first set, those whose value was set to nil since included (gopher-lua
// keeps them, as Lua 5.1 keeps dead keys until a rehash): LTable.keys.
func tableKeys(t *lua.LTable) (keys []lua.LValue, ok bool) {
	defer func() {
		if recover() != nil {
			keys, ok = nil, false
		}
	}()
	f := reflect.ValueOf(t).Elem().FieldByName("keys")
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem() != lvalueType {
		return nil, false
	}
	return *(*[]lua.LValue)(unsafe.Pointer(f.UnsafeAddr())), true
}
