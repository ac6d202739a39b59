package script

import lua "github.com/yuin/gopher-lua"

func check51(code []byte, name string) string               { return "" }
func (st *state) luaMessage(L *lua.LState, s string) string { return s }
