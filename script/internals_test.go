package script

import (
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// TestInternals fails when gopher-lua no longer has the private fields the
// engine reads (internals.go): a new version must be checked before use.
func TestInternals(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	var pcSeen, regSeen bool
	L.SetGlobal("probe", L.NewFunction(func(L *lua.LState) int {
		dbg, ok := L.GetStack(1)
		if !ok {
			t.Fatal("no caller frame")
		}
		pc, ok := framePc(dbg)
		pcSeen = ok && pc > 0
		vals, ok := registryValues(L)
		for _, v := range vals {
			if s, isStr := v.(lua.LString); isStr && s == "marker" {
				regSeen = ok
			}
		}
		return 0
	}))
	if err := L.DoString("local m = 'marker' probe()"); err != nil {
		t.Fatal(err)
	}
	if !pcSeen {
		t.Error("framePc cannot read a frame's pc")
	}
	if !regSeen {
		t.Error("registryValues cannot read the value stack")
	}
	tb := L.NewTable()
	tb.RawSetString("a", lua.LNumber(1))
	tb.RawSetString("b", lua.LNumber(2))
	tb.RawSetString("a", lua.LNil)
	keys, ok := tableKeys(tb)
	if !ok || len(keys) != 2 || keys[0] != lua.LString("a") || keys[1] != lua.LString("b") {
		t.Errorf("tableKeys: %v %v", keys, ok)
	}
}
