package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/nettest"
)

// schedSlack is added to the contract's budget + 10ms when a clause checks
// how long a call took: a loaded 2-core machine under -race is seen to be
// 60ms late to wake a goroutine whose deadline passed. A driver that ignores
// its budget is late by its own socket timeouts, far more.
const schedSlack = 100 * time.Millisecond

// stallBudget is the budget of the calls T1 and V4 make to a server that
// never answers or answers nonsense.
const stallBudget = 250 * time.Millisecond

func init() {
	registerAlone("T1", "every call returns within its budget + 10ms with ErrTimeout, also when "+
		"the server never answers; one its caller cancels in flight, with context.Canceled", testT1)
	registerAlone("T2", "connection refused returns ErrUnavailable within the budget", testT2)
	registerAlone("T3", "Open does no network I/O; calls succeed once the server appears, "+
		"without reopening", testT3)
	registerAlone("T4", "nothing outlives a timed-out call past its budget; Close releases every "+
		"goroutine and connection", testT4)
	registerAlone("T5", "a call whose reply was lost is never re-sent; "+
		"script flush and restart are invisible", testT5)
	register("T6", "after Close every method returns ErrClosed; Close twice is fine", testT6)
}

type op struct {
	name string
	call func(ctx context.Context, st *fleetstore.Store) error
}

// ops returns one call of every Store method on fresh names of tenant:
// Peek too when the driver has it (suite.peeks).
func (t *clauseT) ops(tenant string) []op {
	c := t.claimFor(tenant, "hook-a")
	b := bucket(tenant)
	ops := []op{
		{"hit", func(ctx context.Context, st *fleetstore.Store) error {
			_, err := st.Hit(ctx, []fleetstore.Charge{b}, &c)
			return err
		}},
		{"commit", func(ctx context.Context, st *fleetstore.Store) error { return st.Commit(ctx, c) }},
		{"release", func(ctx context.Context, st *fleetstore.Store) error { return st.Release(ctx, c) }},
		{"reset", func(ctx context.Context, st *fleetstore.Store) error {
			return st.Reset(ctx, tenant)
		}},
		{"ping", func(ctx context.Context, st *fleetstore.Store) error { return st.Ping(ctx) }},
	}
	if t.s.peeks {
		ops = append(ops, op{"peek", func(ctx context.Context, st *fleetstore.Store) error {
			_, err := st.Peek(ctx, tenant, peekLimits.hooks)
			return err
		}})
	}
	return ops
}

// stalledURL is a URL whose store accepts calls and never answers, or "".
func (t *clauseT) stalledURL() string {
	if t.s.cfg.StallURL != "" {
		u, err := t.s.withPrefix(t.s.cfg.StallURL)
		if err != nil {
			t.Fatalf("StallURL: %v", err)
		}
		return u
	}
	if t.s.cfg.AddrURL == nil {
		return ""
	}
	return t.addrURL(nettest.NewSilent(t).Addr())
}

func testT1(t *clauseT) {
	// A context already past its deadline fails at once.
	st := t.open()
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, o := range t.ops(t.tenant()) {
		start := time.Now()
		err := o.call(past, st)
		if !errors.Is(err, fleetstore.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with an expired context: got %v, "+
				"want ErrTimeout matching context.DeadlineExceeded", o.name, err)
		}
		if d := time.Since(start); d > 10*time.Millisecond+schedSlack {
			t.Errorf("%s with an expired context took %v", o.name, d)
		}
	}

	raw := t.stalledURL()
	if raw == "" {
		t.Logf("no host:port in the URL, no AddrURL, no StallURL: the never-answering server part " +
			"is not checked")
		return
	}
	const budget = stallBudget
	for _, tc := range []struct {
		name      string
		storeTime time.Duration
		ctxTime   time.Duration // 0: no caller deadline
	}{
		{"store timeout", budget, 0},
		{"caller deadline earlier than the store timeout", 10 * budget, budget},
	} {
		st := t.openURL(raw, fleetstore.WithTimeout(tc.storeTime))
		// callCtx is a call's context: the caller's deadline, if any.
		callCtx := func() context.Context {
			if tc.ctxTime == 0 {
				return context.Background()
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctxTime)
			t.Cleanup(cancel)
			return ctx
		}
		for _, o := range t.ops(t.tenant()) {
			ctx := callCtx()
			start := time.Now()
			err := o.call(ctx, st)
			d := time.Since(start)
			if !errors.Is(err, fleetstore.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: %s against a server that never answers: got %v, want ErrTimeout", tc.name,
					o.name, err)
			}
			if d > budget+10*time.Millisecond+schedSlack {
				t.Errorf("%s: %s took %v, budget %v (+10ms allowed)", tc.name, o.name, d, budget)
			}
		}
		// A batch that times out as a whole, at the store's timeout or at
		// the caller's deadline, is one ErrTimeout, not one error per claim.
		batch := []fleetstore.Claim{t.claimFor(t.tenant(), "hook-a"), t.claimFor(t.tenant(), "hook-a"),
			t.claimFor(t.tenant(), "hook-a")}
		err := st.Commit(callCtx(), batch...)
		var ce *fleetstore.ClaimError
		if !errors.Is(err, fleetstore.ErrTimeout) || errors.As(err, &ce) {
			t.Errorf("%s: batch commit of %d claims against a server that never answers: %v, want one "+
				"ErrTimeout for the whole call", tc.name, len(batch), err)
		}
	}

	// A call in flight that its caller cancels ends by its deadline at the
	// latest (a driver may go on to it: the Redis family's clients heed the
	// deadline, not the cancellation), and is context.Canceled with no
	// sentinel. Every method at once, each cancelled 20ms in.
	st = t.openURL(raw, fleetstore.WithTimeout(budget))
	ops := t.ops(t.tenant())
	errs := make([]error, len(ops))
	took := make([]time.Duration, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(20*time.Millisecond, cancel)
			start := time.Now()
			errs[i] = o.call(ctx, st)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, o := range ops {
		err := errs[i]
		if !errors.Is(err, context.Canceled) || errors.Is(err, fleetstore.ErrTimeout) ||
			errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("%s cancelled in flight against a server that never answers: got %v, want "+
				"context.Canceled and no sentinel", o.name, err)
		}
		if took[i] > budget+10*time.Millisecond+schedSlack {
			t.Errorf("%s cancelled in flight took %v, budget %v (+10ms allowed)", o.name, took[i], budget)
		}
	}
}

func testT2(t *clauseT) {
	if t.s.cfg.AddrURL == nil {
		t.Skipf("no host:port in the URL and no Config.AddrURL: the driver has no network address")
	}
	const budget = time.Second
	st := t.openURL(t.addrURL(nettest.RefusedAddr(t)), fleetstore.WithTimeout(budget))
	for _, o := range t.ops(t.tenant()) {
		start := time.Now()
		err := o.call(context.Background(), st)
		if !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("%s against a refused port: got %v, want ErrUnavailable", o.name, err)
		}
		if d := time.Since(start); d > budget {
			t.Errorf("%s against a refused port took %v, budget %v", o.name, d, budget)
		}
	}
	// A batch that reaches no server fails as a whole: one ErrUnavailable,
	// not one error per claim (the driver's whole-call result).
	batch := []fleetstore.Claim{t.claimFor(t.tenant(), "hook-a"), t.claimFor(t.tenant(), "hook-a"),
		t.claimFor(t.tenant(), "hook-a")}
	for _, settle := range []struct {
		name string
		call func(context.Context, ...fleetstore.Claim) error
	}{{"commit", st.Commit}, {"release", st.Release}} {
		err := settle.call(context.Background(), batch...)
		var ce *fleetstore.ClaimError
		switch {
		case !errors.Is(err, fleetstore.ErrUnavailable):
			t.Errorf("batch %s of %d claims against a refused port: got %v, want ErrUnavailable",
				settle.name, len(batch), err)
		case errors.As(err, &ce):
			t.Errorf("batch %s of %d claims against a refused port: the failure of the whole call "+
				"reported per claim (claims[%d]): %v",
				settle.name, len(batch), ce.Index, err)
		}
	}
}

func testT3(t *clauseT) {
	if t.s.cfg.AddrURL == nil {
		t.Skipf("no host:port in the URL and no Config.AddrURL: the driver has no network address")
	}
	silent := nettest.NewSilent(t)
	for _, addr := range []string{silent.Addr(), nettest.RefusedAddr(t)} {
		start := time.Now()
		st, err := t.s.openStore(t.addrURL(addr))
		if err != nil {
			t.Fatalf("open %s: %v", addr, err)
		}
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("open of %s took %v: Open must not wait on the network", addr, d)
		}
		st.Close()
	}
	time.Sleep(100 * time.Millisecond)
	if n := silent.Accepted(); n > 0 {
		t.Errorf("Open and Close with no call made %d connection(s): Open must do no network I/O", n)
	}

	target := t.serverAddr()
	if target == "" {
		t.Logf("the URL has no host:port: the server-appears-later part is not checked")
		return
	}
	later := nettest.RefusedAddr(t)
	st := t.openURL(t.addrURL(later), fleetstore.WithTimeout(time.Second))
	if err := st.Ping(context.Background()); err == nil {
		t.Fatalf("ping before the server appeared: no error")
	}
	nettest.NewProxyAt(t, later, target, nil)
	tenant := t.tenant()
	deadline := time.Now().Add(3 * time.Second)
	for {
		res, err := st.Hit(context.Background(), []fleetstore.Charge{bucket(tenant)}, nil)
		if err == nil && res.Outcome == fleetstore.OK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hit 3s after the server appeared: %v %v, want OK without reopening", describe(res),
				err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testT4 tells the Store's goroutines by a pprof label: Open, the calls and
// Close run under a label of their own (runtime/pprof.Do), which every
// goroutine they start inherits, and so does every goroutine those start.
// The goroutines left with it after Close are the Store's, whatever else
// the process runs meanwhile (other tests, other configurations). Not
// counted: a goroutine a timer starts (time.AfterFunc's f), or one that a
// goroutine shared by the process (another Store's, a pool's) starts for
// this Store: they carry no label.
func testT4(t *clauseT) {
	var silent *nettest.Server
	raw := t.s.cfg.StallURL
	if raw != "" {
		raw = t.stalledURL()
	} else if t.s.cfg.AddrURL != nil {
		silent = nettest.NewSilent(t)
		raw = t.addrURL(silent.Addr())
	} else {
		raw = t.s.url
	}
	const budget = 100 * time.Millisecond
	// One call on an unlabelled Store first: a goroutine a driver starts
	// once per process, at its first call, is then started without the
	// label (whichever clauses run, and in whatever order).
	if warm, err := t.s.openStore(raw, fleetstore.WithTimeout(budget)); err == nil {
		_ = warm.Ping(context.Background())
		warm.Close()
	}
	mark := randHex(8)
	pprof.Do(context.Background(), pprof.Labels(leakLabel, mark), func(context.Context) {
		st, err := t.s.openStore(raw, fleetstore.WithTimeout(budget))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ops := t.ops(t.tenant())
				o := ops[i%len(ops)]
				start := time.Now()
				_ = o.call(context.Background(), st)
				if d := time.Since(start); d > budget+10*time.Millisecond+schedSlack*3 {
					t.Errorf("%s took %v under 50 concurrent calls, budget %v", o.name, d, budget)
				}
			}()
		}
		wg.Wait()
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	closed := time.Now()
	left := labelled(leakLabel, mark)
	for left != nil && time.Since(closed) < budget+2*time.Second {
		time.Sleep(50 * time.Millisecond)
		left = labelled(leakLabel, mark)
	}
	if left != nil {
		t.Fatalf("goroutines started by Open, the calls or Close still running %v after Close:\n%s",
			time.Since(closed).Round(time.Millisecond), strings.Join(left, "\n\n"))
	}
	if silent == nil {
		return
	}
	if open := silent.StillOpen(time.Second); open > 0 {
		t.Errorf("%d of %d connections still open 1s after Close", open, silent.Accepted())
	}
}

// leakLabel is the pprof label key T4 marks its Store's goroutines with.
const leakLabel = "fleetstore.conformance.T4"

// labelled returns the goroutines whose pprof label key is value, from
// the goroutine profile: one entry per distinct stack, with its count and
// label line; nil when there are none.
func labelled(key, value string) []string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	want := fmt.Sprintf("%q:%q", key, value)
	var out []string
	_, recs, _ := strings.Cut(b.String(), "\n") // "goroutine profile: total N"
	for _, rec := range strings.Split(recs, "\n\n") {
		if strings.Contains(rec, "\n# labels: {") && strings.Contains(rec, want) {
			out = append(out, rec)
		}
	}
	return out
}

func testT5(t *clauseT) {
	st := t.open()
	if f := t.s.cfg.FlushScripts; f != nil {
		t.want("hit", t.hit(st, []fleetstore.Charge{bucket(t.tenant())}, nil), fleetstore.OK)
		if err := f(); err != nil {
			t.Fatalf("FlushScripts: %v", err)
		}
		t.want("first hit after the script cache was flushed",
			t.hit(st, []fleetstore.Charge{bucket(t.tenant())}, nil), fleetstore.OK)
	}
	if f := t.s.cfg.Restart; f != nil {
		t.want("hit", t.hit(st, []fleetstore.Charge{bucket(t.tenant())}, nil), fleetstore.OK)
		if err := f(); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		t.want("first hit after the server restarted",
			t.hit(st, []fleetstore.Charge{bucket(t.tenant())}, nil), fleetstore.OK)
	}

	target := t.serverAddr()
	if t.s.cfg.AddrURL == nil || target == "" {
		t.Logf("no AddrURL or no host:port in the URL: the lost-reply part is not checked")
		return
	}
	p := nettest.NewProxy(t, target, nil)
	lossy := t.openURL(t.addrURL(p.Addr()), fleetstore.WithTimeout(500*time.Millisecond))
	if err := lossy.Ping(context.Background()); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	c := charge(fleetstore.Hooks, t.tenant(), time.Hour, 2*time.Hour)
	p.DropReplies(true)
	res, err := lossy.Hit(context.Background(), []fleetstore.Charge{c}, nil)
	p.DropReplies(false)
	if err == nil {
		t.Logf("the hit's reply did not go through the proxy (%s): the lost-reply part is not checked",
			describe(res))
		return
	}
	if !errors.Is(err, fleetstore.ErrTimeout) && !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Errorf("hit whose reply was lost: got %v, want ErrTimeout or ErrUnavailable", err)
	}
	// The lost hit ran at most once (a driver of several round trips may
	// have lost an earlier reply and written nothing): at least one of the
	// two units is left. A re-sent call would have charged both.
	if got := t.conforming(st, c, 2); got < 1 {
		t.Fatalf("after one hit whose reply was lost, no unit of 2 was left: the call was re-sent")
	}
}

func testT6(t *clauseT) {
	st, err := t.s.openStore(t.s.url)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	for _, o := range t.ops(t.tenant()) {
		if err := o.call(t.ctx(), st); !errors.Is(err, fleetstore.ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", o.name, err)
		}
	}
	if _, err := st.Hit(t.ctx(), nil, nil); !errors.Is(err, fleetstore.ErrClosed) {
		t.Errorf("empty hit after Close: got %v, want ErrClosed", err)
	}
}
