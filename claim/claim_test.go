package claim_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
)

const (
	hour = int64(3_600_000_000) // µs
	// now is a time in µs since 1970 around today (2027).
	now = int64(1_800_000_000_123_457)
)

func pending(hook string, expires int64) claim.State {
	return claim.State{Phase: claim.Pending, HookID: hook, Node: "node-1", Expires: expires}
}

func committed(hook string, expires int64) claim.State {
	return claim.State{Phase: claim.Committed, HookID: hook, Node: "node-2", Expires: expires}
}

// TestHit checks the Hit table of CONTRACT §4 (C1–C4) for hook "a".
func TestHit(t *testing.T) {
	tests := []struct {
		name       string
		give       claim.State
		want       claim.Decision
		wantResult driver.Result
	}{
		{name: "absent", give: claim.State{},
			want: claim.Decision{Verdict: claim.Free}, wantResult: driver.Result{Outcome: driver.OK}},
		{name: "absent with a future expiry", give: claim.State{HookID: "b", Expires: now + hour},
			want: claim.Decision{Verdict: claim.Free}, wantResult: driver.Result{Outcome: driver.OK}},
		{name: "own pending", give: pending("a", now+1),
			want: claim.Decision{Verdict: claim.OwnRetry}, wantResult: driver.Result{Outcome: driver.OK}},
		{name: "own pending expired now", give: pending("a", now),
			want: claim.Decision{Verdict: claim.Free}, wantResult: driver.Result{Outcome: driver.OK}},
		{name: "other's pending expired", give: pending("b", now-1),
			want: claim.Decision{Verdict: claim.Free}, wantResult: driver.Result{Outcome: driver.OK}},
		{name: "other's pending 1µs left", give: pending("b", now+1),
			want:       claim.Decision{Verdict: claim.InFlight, Wait: 1},
			wantResult: driver.Result{Outcome: driver.Pending, RetryAfter: time.Millisecond}},
		{name: "other's pending 1.5ms left", give: pending("b", now+1500),
			want:       claim.Decision{Verdict: claim.InFlight, Wait: 1500},
			wantResult: driver.Result{Outcome: driver.Pending, RetryAfter: 2 * time.Millisecond}},
		{name: "other's pending 1h left", give: pending("b", now+hour),
			want:       claim.Decision{Verdict: claim.InFlight, Wait: hour},
			wantResult: driver.Result{Outcome: driver.Pending, RetryAfter: time.Hour}},
		{name: "own committed", give: committed("a", now+hour),
			want:       claim.Decision{Verdict: claim.Duplicate, HookID: "a"},
			wantResult: driver.Result{Outcome: driver.Duplicate, HookID: "a"}},
		{name: "other's committed", give: committed("b", now+1),
			want:       claim.Decision{Verdict: claim.Duplicate, HookID: "b"},
			wantResult: driver.Result{Outcome: driver.Duplicate, HookID: "b"}},
		{name: "committed expired", give: committed("b", now),
			want: claim.Decision{Verdict: claim.Free}, wantResult: driver.Result{Outcome: driver.OK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := claim.Hit(tt.give, now, "a")
			if got != tt.want {
				t.Fatalf("Hit(%+v, now, %q) = %+v, want %+v", tt.give, "a", got, tt.want)
			}
			if res := got.Result(); res != tt.wantResult {
				t.Errorf("Result() = %+v, want %+v", res, tt.wantResult)
			}
		})
	}
}

// TestSettle checks the settle table of CONTRACT §4 (C5–C8) for hook "a"
// and a TTL of one hour.
func TestSettle(t *testing.T) {
	tests := []struct {
		name string
		give claim.State
		op   claim.Op
		want claim.Settlement
	}{
		// C5: pending, same hook.
		{name: "commit own pending", give: pending("a", now+1), op: claim.Commit,
			want: claim.Settlement{Write: claim.Store, Expires: now + hour}},
		{name: "release own pending", give: pending("a", now+1), op: claim.Release,
			want: claim.Settlement{Write: claim.Delete}},
		// C6: committed, same hook.
		{name: "commit own committed", give: committed("a", now+1), op: claim.Commit,
			want: claim.Settlement{}},
		{name: "release own committed", give: committed("a", now+hour), op: claim.Release,
			want: claim.Settlement{Err: driver.ErrAlreadyCommitted}},
		// C7: absent or expired.
		{name: "commit absent", give: claim.State{}, op: claim.Commit,
			want: claim.Settlement{Write: claim.Store, Expires: now + hour}},
		{name: "release absent", give: claim.State{}, op: claim.Release,
			want: claim.Settlement{}},
		{name: "commit own pending expired", give: pending("a", now), op: claim.Commit,
			want: claim.Settlement{Write: claim.Store, Expires: now + hour}},
		{name: "release own pending expired", give: pending("a", now), op: claim.Release,
			want: claim.Settlement{}},
		{name: "commit other's pending expired", give: pending("b", now-1), op: claim.Commit,
			want: claim.Settlement{Write: claim.Store, Expires: now + hour}},
		{name: "release other's committed expired", give: committed("b", now), op: claim.Release,
			want: claim.Settlement{}},
		{name: "release own committed expired", give: committed("a", now-hour), op: claim.Release,
			want: claim.Settlement{}},
		// C8: held by another hook.
		{name: "commit other's pending", give: pending("b", now+1), op: claim.Commit,
			want: claim.Settlement{Err: &driver.ClaimLostError{Holder: "b"}}},
		{name: "release other's pending", give: pending("b", now+1), op: claim.Release,
			want: claim.Settlement{Err: &driver.ClaimLostError{Holder: "b"}}},
		{name: "commit other's committed", give: committed("b", now+hour), op: claim.Commit,
			want: claim.Settlement{Err: &driver.ClaimLostError{Holder: "b"}}},
		{name: "release other's committed", give: committed("b", now+hour), op: claim.Release,
			want: claim.Settlement{Err: &driver.ClaimLostError{Holder: "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := claim.Settle(tt.give, now, tt.op, "a", hour)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Settle(%+v, now, %v, %q, 1h) = %+v, want %+v", tt.give, tt.op, "a", got, tt.want)
			}
		})
	}
}

func TestLive(t *testing.T) {
	tests := []struct {
		name string
		give claim.State
		want bool
	}{
		{name: "absent", give: claim.State{}, want: false},
		{name: "absent with a future expiry", give: claim.State{Expires: now + 1}, want: false},
		{name: "pending 1µs left", give: pending("a", now+1), want: true},
		{name: "pending expiring now", give: pending("a", now), want: false},
		{name: "committed 1h left", give: committed("a", now+hour), want: true},
		{name: "committed expired", give: committed("a", now-1), want: false},
	}
	for _, tt := range tests {
		if got := tt.give.Live(now); got != tt.want {
			t.Errorf("%s: Live = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestOpString(t *testing.T) {
	for _, tt := range []struct {
		give claim.Op
		want string
	}{{claim.Commit, "commit"}, {claim.Release, "release"}} {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", tt.give, got, tt.want)
		}
	}
}
