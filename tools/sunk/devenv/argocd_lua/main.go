// Command argocd-lua runs Argo CD resource health scripts the way Argo CD's application
// controller does (argo-cd util/lua, VM.runLua and VM.ExecuteHealthLua), so the scripts that
// `sunkctl argocd gen` ships are tested by the interpreter that will run them.
//
// It reads one JSON request from stdin:
//
//	{"script": "<lua>", "openLibs": true|false, "objects": [{...}, ...]}
//
// and writes one JSON array to stdout, one entry per object:
//
//	{"status": "Healthy", "message": "..."} or {"error": "..."}
//
// As in Argo CD: a fresh gopher-lua state per object with SkipOpenLibs, the object bound to
// the global `obj` (JSON numbers become Lua numbers, arrays are appended in order), a one-second
// deadline, the last returned value must be a table, and a status outside Argo CD's set
// becomes Unknown. Libraries: base and table always; string and math only with openLibs
// (resource.customizations.useOpenLibs). Argo CD also opens package and a reduced os, and with
// useOpenLibs every gopher-lua library; loading fewer here is stricter, never looser.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
)

type request struct {
	Script   string `json:"script"`
	OpenLibs bool   `json:"openLibs"`
	Objects  []any  `json:"objects"`
}

type result struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message"`
	Error   string `json:"error,omitempty"`
}

var validStatus = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true,
	"Healthy": true, "Degraded": true, "Missing": true,
}

func decodeValue(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}

func run(script string, openLibs bool, obj any) (res result) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	libs := []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}}
	if openLibs {
		libs = append(libs, struct {
			name string
			open lua.LGFunction
		}{lua.StringLibName, lua.OpenString}, struct {
			name string
			open lua.LGFunction
		}{lua.MathLibName, lua.OpenMath})
	}
	for _, lib := range libs {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true},
			lua.LString(lib.name)); err != nil {
			return result{Error: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decodeValue(l, obj))
	if err := l.DoString(script); err != nil {
		return result{Error: err.Error()}
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return result{Error: fmt.Sprintf("expect table output from Lua script, not %s", l.Get(-1).Type())}
	}
	status, ok := ret.RawGetString("status").(lua.LString)
	if !ok {
		return result{Error: "status is not a string"}
	}
	message := ret.RawGetString("message")
	switch m := message.(type) {
	case lua.LString:
		res.Message = string(m)
	case *lua.LNilType:
	default:
		return result{Error: fmt.Sprintf("message is a %s, not a string", message.Type())}
	}
	if !validStatus[string(status)] {
		return result{Status: "Unknown", Message: "Lua returned an invalid health status"}
	}
	res.Status = string(status)
	return res
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-lua: bad request:", err)
		os.Exit(2)
	}
	out := make([]result, 0, len(req.Objects))
	for _, obj := range req.Objects {
		out = append(out, run(req.Script, req.OpenLibs, obj))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-lua:", err)
		os.Exit(1)
	}
}
