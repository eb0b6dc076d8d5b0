package round

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// The queue alone, with a Send that records its rounds: the call 0 holds
// its round on the wire until the test lets it go, so that the calls made
// meanwhile queue.

type sentRound struct {
	ctx context.Context
	vs  []int
}

type fake struct {
	mu      sync.Mutex
	rounds  []sentRound
	started chan struct{} // the call 0 is on the wire
	hold    chan struct{} // closed: the call 0's round comes back
}

func newFake() *fake {
	return &fake{started: make(chan struct{}, 1), hold: make(chan struct{})}
}

func (f *fake) send(ctx context.Context, vs []int) []string {
	f.mu.Lock()
	f.rounds = append(f.rounds, sentRound{ctx: ctx, vs: slices.Clone(vs)})
	f.mu.Unlock()
	out := make([]string, len(vs))
	for i, v := range vs {
		if v == 0 {
			f.started <- struct{}{}
			<-f.hold
		}
		out[i] = fmt.Sprint("ok ", v)
	}
	return out
}

func (f *fake) sent() []sentRound {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rounds)
}

func fail(err error) string { return "fail " + err.Error() }

func newQueue(f *fake, max int) *Queue[int, string] {
	return New(max, f.send, fail)
}

// waitQueued waits until n calls queue in lane key.
func waitQueued(t *testing.T, q *Queue[int, string], key string, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		q.mu.Lock()
		l := q.lanes[key]
		k := 0
		if l != nil {
			k = len(l.queue)
		}
		q.mu.Unlock()
		if k >= n {
			return
		}
	}
	t.Fatalf("%d calls did not queue in lane %q", n, key)
}

// do runs v in a goroutine; its result comes on the channel returned.
func do(q *Queue[int, string], ctx context.Context, key string, n, v int) <-chan string {
	out := make(chan string, 1)
	go func() { out <- q.Do(ctx, key, n, v) }()
	return out
}

func get(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("a call did not return")
		return ""
	}
}

// block starts the call 0 in lane key and waits until it is on the wire.
func block(t *testing.T, q *Queue[int, string], f *fake, key string) <-chan string {
	t.Helper()
	c := do(q, context.Background(), key, 1, 0)
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call 0 was not sent")
	}
	return c
}

// queueTwo starts the call 0 and queues behind it v1, on a context with
// no deadline (so its caller is to send the next round) that cancel ends,
// then v2, on an hour's deadline.
func queueTwo(t *testing.T, q *Queue[int, string], f *fake, v1, v2 int) (first, c1, c2 <-chan string,
	cancel context.CancelFunc) {
	t.Helper()
	first = block(t, q, f, "")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c1 = do(q, ctx, "", 1, v1)
	waitQueued(t, q, "", 1)
	dctx, dcancel := context.WithTimeout(context.Background(), time.Hour)
	t.Cleanup(dcancel)
	c2 = do(q, dctx, "", 1, v2)
	waitQueued(t, q, "", 2)
	return first, c1, c2, cancel
}

// started returns a fake, a Queue of rounds of at most max over it, and
// the call 0 on the wire in lane key.
func started(t *testing.T, max int, key string) (*fake, *Queue[int, string], <-chan string) {
	t.Helper()
	f := newFake()
	q := newQueue(f, max)
	return f, q, block(t, q, f, key)
}

type ctxKey struct{}

// A call that finds its lane idle is sent at once, alone, on its own
// context: no round, no timer, no derived context.
func TestLoneCallSentAtOnce(t *testing.T) {
	f := newFake()
	q := newQueue(f, 8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if got := q.Do(ctx, "", 1, 7); got != "ok 7" {
		t.Fatalf("Do = %q, want ok 7", got)
	}
	r := f.sent()
	if len(r) != 1 || !slices.Equal(r[0].vs, []int{7}) {
		t.Fatalf("sent %v, want one round of [7]", r)
	}
	if r[0].ctx != ctx {
		t.Fatal("a lone call was not sent on its own context")
	}
}

// A call whose context has ended before it is sent is never sent.
func TestLoneCallEndedNotSent(t *testing.T) {
	f := newFake()
	q := newQueue(f, 8)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := q.Do(ctx, "", 1, 7); got != fail(context.Canceled) {
		t.Fatalf("Do = %q, want %q", got, fail(context.Canceled))
	}
	if r := f.sent(); len(r) != 0 {
		t.Fatalf("sent %v, want nothing", r)
	}
}

// The calls queued behind a round go in the next one, in the order they
// queued, and each gets its own result.
func TestRoundKeepsOrder(t *testing.T) {
	f, q, first := started(t, 8, "")
	var res []<-chan string
	for i := 1; i <= 5; i++ {
		res = append(res, do(q, context.Background(), "", 1, i))
		waitQueued(t, q, "", i)
	}
	close(f.hold)
	if got := get(t, first); got != "ok 0" {
		t.Fatalf("call 0 = %q", got)
	}
	for i, c := range res {
		if got, want := get(t, c), fmt.Sprint("ok ", i+1); got != want {
			t.Fatalf("call %d = %q, want %q", i+1, got, want)
		}
	}
	r := f.sent()
	if len(r) != 2 || !slices.Equal(r[1].vs, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("rounds %v, want [0] then [1 2 3 4 5]", r)
	}
}

// A round weighs at most max; a call heavier than max goes alone.
func TestRoundBounded(t *testing.T) {
	f, q, first := started(t, 4, "")
	weights := []int{2, 2, 1, 9, 3}
	var res []<-chan string
	for i, w := range weights {
		res = append(res, do(q, context.Background(), "", w, i+1))
		waitQueued(t, q, "", i+1)
	}
	close(f.hold)
	get(t, first)
	for _, c := range res {
		get(t, c)
	}
	var got [][]int
	for _, r := range f.sent()[1:] {
		got = append(got, r.vs)
	}
	want := [][]int{{1, 2}, {3}, {4}, {5}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("rounds %v, want %v", got, want)
	}
}

// A queued call returns by its own deadline while the round ahead of it
// is still on the wire, and is never sent after.
func TestOwnDeadline(t *testing.T) {
	f, q, first := started(t, 8, "")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	late := do(q, ctx, "", 1, 1)
	other := do(q, context.Background(), "", 1, 2)
	if got := get(t, late); got != fail(context.DeadlineExceeded) {
		t.Fatalf("call 1 = %q, want %q", got, fail(context.DeadlineExceeded))
	}
	close(f.hold) // only now does the round ahead come back
	get(t, first)
	if got := get(t, other); got != "ok 2" {
		t.Fatalf("call 2 = %q", got)
	}
	for _, r := range f.sent() {
		if slices.Contains(r.vs, 1) {
			t.Fatalf("call 1 was sent after its deadline: rounds %v", f.sent())
		}
	}
}

// A round runs on the latest deadline of its calls, with the values of
// the call that sends it, which is the one of that deadline.
func TestRoundOnLatestDeadline(t *testing.T) {
	f, q, first := started(t, 8, "")
	now := time.Now()
	ctx1, cancel1 := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, 1), now.Add(time.Hour))
	defer cancel1()
	ctx2, cancel2 := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, 2), now.Add(2*time.Hour))
	defer cancel2()
	c1 := do(q, ctx1, "", 1, 1)
	waitQueued(t, q, "", 1)
	c2 := do(q, ctx2, "", 1, 2)
	waitQueued(t, q, "", 2)
	close(f.hold)
	get(t, first)
	if get(t, c1) != "ok 1" || get(t, c2) != "ok 2" {
		t.Fatal("a call of the round failed")
	}
	r := f.sent()[1]
	if dl, ok := r.ctx.Deadline(); !ok || !dl.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("round deadline %v %v, want the latest, %v", dl, ok, now.Add(2*time.Hour))
	}
	if v := r.ctx.Value(ctxKey{}); v != 2 {
		t.Fatalf("round sent by call %v, want 2 (the latest deadline)", v)
	}
}

// The caller that sends a round for others is cancelled on the wire: the
// others still get their answers, and the sender, once the round is back,
// its context's error, as any call cancelled in flight (CONTRACT T1).
func TestSenderCancelled(t *testing.T) {
	f := newFake()
	q := newQueue(f, 8)
	first, sender, other, cancel := queueTwo(t, q, f, 0, 3) // 0: held on the wire
	f.hold <- struct{}{}                                    // the first round comes back
	get(t, first)
	<-f.started // the second round is on the wire
	cancel()
	close(f.hold)
	if got := get(t, sender); got != fail(context.Canceled) {
		t.Fatalf("the cancelled sender = %q, want %q", got, fail(context.Canceled))
	}
	if got := get(t, other); got != "ok 3" {
		t.Fatalf("call 3 = %q, want ok 3", got)
	}
	if err := f.sent()[1].ctx.Err(); err != nil {
		t.Fatalf("round context ended: %v", err)
	}
}

// A call cancelled while queued is taken out of its round and never sent;
// the round goes on without it, sent by another of its calls.
func TestCancelledNeverSent(t *testing.T) {
	f := newFake()
	q := newQueue(f, 8)
	first, gone, stay, cancel := queueTwo(t, q, f, 1, 2)
	cancel()
	if got := get(t, gone); got != fail(context.Canceled) {
		t.Fatalf("call 1 = %q, want %q", got, fail(context.Canceled))
	}
	close(f.hold)
	get(t, first)
	if got := get(t, stay); got != "ok 2" {
		t.Fatalf("call 2 = %q", got)
	}
	r := f.sent()
	if len(r) != 2 || !slices.Equal(r[1].vs, []int{2}) {
		t.Fatalf("rounds %v, want [0] then [2]", r)
	}
}

// A round in flight in one lane holds up no call of another, and a lane
// but "" is dropped when idle.
func TestLanes(t *testing.T) {
	f, q, first := started(t, 8, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := q.Do(ctx, "b", 1, 5); got != "ok 5" {
		t.Fatalf("lane b = %q", got)
	}
	if r := f.sent(); len(r) != 2 || r[1].ctx != ctx {
		t.Fatal("lane b's call was not sent at once, alone")
	}
	close(f.hold)
	get(t, first)
	q.mu.Lock()
	n := len(q.lanes)
	q.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d lanes left, want none", n)
	}
}

// Many callers at once: each gets its own answer, none is lost.
func TestManyCallers(t *testing.T) {
	f := newFake()
	close(f.hold)
	f.started = make(chan struct{}, 1000)
	q := newQueue(f, 4)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 1; i <= 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := q.Do(context.Background(), fmt.Sprint(i%3), 1+i%2, i); got != fmt.Sprint("ok ", i) {
				errs <- errors.New(got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A call picked for a round whose context ends before the round is sent
// (its caller has not yet seen it) is taken out there: never sent, it
// gets its context's error.
func TestPickedEndedNotSent(t *testing.T) {
	f := newFake()
	q := newQueue(f, 8)
	l := &lane[int, string]{busy: true}
	q.lanes = map[string]*lane[int, string]{"": l}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ended := &call[int, string]{ctx: ctx, n: 1, v: 1, wake: make(chan *round[int, string], 1), lane: l, state: picked}
	exec := &call[int, string]{ctx: context.Background(), n: 1, v: 2, lane: l, state: picked}
	r := &round[int, string]{calls: []*call[int, string]{ended, exec}, exec: exec}
	ended.round, exec.round = r, r
	q.sendRound(exec, r)
	if got := f.sent(); len(got) != 1 || !slices.Equal(got[0].vs, []int{2}) {
		t.Fatalf("rounds %v, want one of [2]", got)
	}
	if ended.res != fail(context.Canceled) || exec.res != "ok 2" {
		t.Fatalf("results %q, %q", ended.res, exec.res)
	}
	if w := <-ended.wake; w != nil {
		t.Fatal("the ended call was handed a round")
	}
}

// The call handed a round to send whose context ends before it sends it
// hands the round to another of its calls, the one of the latest
// deadline; the round is not lost.
func TestPickedSenderLeaves(t *testing.T) {
	q := newQueue(newFake(), 8)
	l := &lane[int, string]{busy: true}
	q.lanes = map[string]*lane[int, string]{"": l}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	soon, cs := context.WithTimeout(context.Background(), time.Hour)
	defer cs()
	late, cl := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cl()
	mk := func(ctx context.Context, v int) *call[int, string] {
		return &call[int, string]{ctx: ctx, n: 1, v: v, wake: make(chan *round[int, string], 1), lane: l, state: picked}
	}
	gone, a, b := mk(ctx, 1), mk(soon, 2), mk(late, 3)
	r := &round[int, string]{calls: []*call[int, string]{a, gone, b}, exec: gone}
	gone.round, a.round, b.round = r, r, r
	q.leave(gone)
	if gone.res != fail(context.Canceled) {
		t.Fatalf("left call = %q", gone.res)
	}
	select {
	case got := <-b.wake:
		if got != r || r.exec != b {
			t.Fatal("call 3 was not handed its round to send")
		}
	default:
		t.Fatal("the round was not handed on")
	}
	if len(a.wake) != 0 {
		t.Fatal("call 2 was woken too")
	}
}
