package webhook

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
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

// acceptProvider verifies anything and names the event by the body; it is
// an Accepter of status (0: no Accepter), retrying or not.
type acceptProvider struct {
	retries bool
	status  int
}

func (acceptProvider) Name() string                                          { return "accept" }
func (p acceptProvider) Retries() bool                                       { return p.retries }
func (acceptProvider) Verify(http.Header, []byte, []string, time.Time) error { return nil }
func (acceptProvider) EventID(_ http.Header, body []byte) (string, error)    { return string(body), nil }

type accepter struct{ acceptProvider }

func (a accepter) AcceptStatus() int { return a.status }

// TestAcceptStatus: a stored delivery, and a deferred one (a provider
// that does not retry, over its limit), are answered 202, or the
// provider's AcceptStatus when it is an Accepter of a 2xx (also through
// Deferring); OnDelivery is told the status sent. Paddle and Linear are
// Accepters of 200. Fails with a handler that answers 202 whatever the
// provider, or that takes a 500 for a success (New refuses it).
func TestAcceptStatus(t *testing.T) {
	t.Parallel()
	for _, p := range []Provider{Paddle(0), Linear(0), Deferring(Deferring(Linear(0)))} {
		if s, err := acceptStatus(p); s != http.StatusOK || err != nil {
			t.Errorf("%s: %d %v, want 200", p.Name(), s, err)
		}
	}
	for _, tt := range []struct {
		name string
		p    Provider
		want int
	}{
		{"no Accepter", acceptProvider{}, http.StatusAccepted},
		{"Accepter of 200", accepter{acceptProvider{status: 200}}, http.StatusOK},
		{"Accepter of 204", accepter{acceptProvider{status: 204}}, http.StatusNoContent},
		{"Deferring an Accepter of 200", Deferring(accepter{acceptProvider{retries: true, status: 200}}),
			http.StatusOK},
	} {
		store, err := fleetstore.Open("memory://")
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		one := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 1))
		var got []*Delivery
		h, err := New(Config{
			Store: store, Provider: tt.p, Limits: []fleetstore.Limit{one},
			Secrets:    func(string) ([]string, error) { return []string{"s"}, nil },
			Tenant:     func(*http.Request, []byte) (string, error) { return "acme", nil },
			Sink:       SinkFunc(func(context.Context, *Hook) error { return nil }),
			OnDelivery: func(d *Delivery) { got = append(got, d) },
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for i, ev := range []string{"evt-1", "evt-1", "evt-2"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(ev)))
			switch {
			case i == 0: // stored
				want = append(want, tt.want)
			case i == 1: // a redelivery
				want = append(want, http.StatusOK)
			case tt.p.Retries(): // over the limit
				want = append(want, http.StatusTooManyRequests)
			default: // deferred
				want = append(want, tt.want)
			}
			told := -1
			if len(got) == i+1 {
				told = got[i].Status
			}
			if w.Code != want[i] || told != w.Code {
				t.Errorf("%s: delivery %d (%s) answered %d, OnDelivery told %d; want %d", tt.name, i, ev,
					w.Code, told, want[i])
			}
		}
		if len(got) != 3 {
			continue
		}
		if o := got[2].Outcome; tt.p.Retries() && o != RateLimited || !tt.p.Retries() && o != Deferred {
			t.Errorf("%s: the delivery over the limit was %v", tt.name, o)
		}
	}
	// An AcceptStatus that is no success is the configuration's error.
	for _, status := range []int{0, 199, 300, 500} {
		_, err := New(Config{
			Store: nopStore(t), Provider: Deferring(accepter{acceptProvider{status: status}}),
			Secrets: func(string) ([]string, error) { return nil, nil },
			Tenant:  func(*http.Request, []byte) (string, error) { return "", nil },
			Sink:    SinkFunc(func(context.Context, *Hook) error { return nil }),
		})
		var inv *fleetstore.InvalidError
		if !errors.As(err, &inv) || inv.Field != "config.provider" ||
			!strings.Contains(inv.Reason, strconv.Itoa(status)) {
			t.Errorf("New with AcceptStatus %d: %v, want ErrInvalid naming config.provider", status, err)
		}
	}
}

func nopStore(t *testing.T) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestRetryBodies: an answer with Retry-After says, in its body, the
// seconds it says: a 429 over the limit, a 503 when the Sink fails, a 503
// when the store is closed.
func TestRetryBodies(t *testing.T) {
	t.Parallel()
	store := nopStore(t)
	one := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 1))
	h, err := New(Config{
		Store: store, Provider: acceptProvider{retries: true}, Limits: []fleetstore.Limit{one},
		Secrets: func(string) ([]string, error) { return []string{"s"}, nil },
		Tenant:  func(*http.Request, []byte) (string, error) { return "acme", nil },
		Sink: SinkFunc(func(_ context.Context, h *Hook) error {
			if string(h.Body) == "sink-fails" {
				return errors.New("queue down")
			}
			return nil
		}),
		RetryAfter: 7 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	send := func(event string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(event)))
		return w
	}
	send("evt-1")
	for _, tt := range []struct {
		event  string
		status int
		want   string
		before func()
	}{
		{"evt-2", 429, "rate limited: retry after 3600 seconds\n", nil},
		{"sink-fails", 503, "not stored: retry after 7 seconds\n", func() { store.Reset(context.Background(), "acme") }},
		{"evt-3", 503, "store unavailable: retry after 7 seconds\n", func() { store.Close() }},
	} {
		if tt.before != nil {
			tt.before()
		}
		w := send(tt.event)
		if w.Code != tt.status || w.Body.String() != tt.want ||
			!strings.Contains(tt.want, " "+w.Header().Get("Retry-After")+" ") {
			t.Errorf("%s: %d %q, Retry-After %q; want %d %q", tt.event, w.Code, w.Body, w.Header().Get("Retry-After"), tt.status, tt.want)
		}
	}
}
