package webhook

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docStatuses parses the table of doc.go's "# Statuses": outcome, status
// code, status text and Retry-After column of every row.
func docStatuses(t *testing.T) map[string][3]string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), "// # Statuses\n")
	if !ok {
		t.Fatal(`doc.go has no "# Statuses" section`)
	}
	section, _, _ = strings.Cut(section, "\n// #")
	cols := regexp.MustCompile(` {2,}`)
	rows := map[string][3]string{}
	header := true
	for line := range strings.SplitSeq(section, "\n") {
		row, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			continue
		}
		if header { // outcome, status, Retry-After
			header = false
			continue
		}
		f := cols.Split(strings.TrimRight(row, " "), -1)
		if len(f) < 2 || len(f) > 3 {
			t.Fatalf("doc.go's status table: a row of %d columns: %q", len(f), row)
		}
		code, text, _ := strings.Cut(f[1], " ")
		retry := ""
		if len(f) == 3 {
			retry = f[2]
		}
		if _, dup := rows[f[0]]; dup {
			t.Errorf("doc.go's status table: %q twice", f[0])
		}
		rows[f[0]] = [3]string{code, text, retry}
	}
	if len(rows) == 0 {
		t.Fatal("doc.go's status table has no rows")
	}
	return rows
}

// TestStatusTable: the package doc's status table and the handler's
// replies are the same rows: outcome, status (code and text) and where
// Retry-After comes from.
func TestStatusTable(t *testing.T) {
	doc := docStatuses(t)
	for r, a := range replies {
		if Outcome(r) == noOutcome {
			continue
		}
		row, ok := doc[a.outcome]
		if !ok {
			t.Errorf("reply %q (%d) is not in doc.go's status table", a.outcome, a.status)
			continue
		}
		delete(doc, a.outcome)
		want := [3]string{strconv.Itoa(a.status), http.StatusText(a.status), a.retry.String()}
		if row != want {
			t.Errorf("%q: doc.go says %q, the handler %q", a.outcome, row, want)
		}
	}
	for outcome := range doc {
		t.Errorf("doc.go's status table has %q, the handler has no such reply", outcome)
	}
}

// TestRepliesOnly: no code of the package writes a status but
// Handler.reply, so that the table is every answer.
func TestRepliesOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name == "reply" {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if ok && (sel.Sel.Name == "WriteHeader" || sel.Sel.Name == "Error" && isIdent(sel.X, "http") ||
					sel.Sel.Name == "WriteString" && isIdent(sel.X, "io") || sel.Sel.Name == "Write" && isIdent(sel.X, "w")) {
					t.Errorf("%s: %s writes an answer outside Handler.reply", fset.Position(sel.Pos()), fn.Name.Name)
				}
				return true
			})
		}
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
