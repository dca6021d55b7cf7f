package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// The metric filters count the services' own log lines: the messages they match are the
// constants the code logs (read from its source: the deploy module does not build it).
func TestMetricFiltersMatchTheLinesTheCodeLogs(t *testing.T) {
	for file, want := range map[string]map[string]string{
		"../internal/mappings/check.go":          {"LogNotPolling": logNotPolling, "LogChecked": logMappingChecked},
		"../internal/commands/finish_pending.go": {"StageTablesMessage": logStageTables},
	} {
		got := stringConsts(t, file)
		for name, msg := range want {
			if got[name] != msg {
				t.Errorf("%s: %s = %q, the metric filter matches %q", file, name, got[name], msg)
			}
		}
	}
}

func stringConsts(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
		return true
	})
	return out
}
