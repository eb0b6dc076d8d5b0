package redis

import (
	"errors"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// mrec is the model of one claim: state 'p' or 'c', its hook, and bounds on
// its expiry on the server's clock (µs): lo ≤ expiry ≤ hi. pt is the
// pending TTL (µs) of a pending claim.
type mrec struct {
	st     byte
	hook   string
	lo, hi int64
	pt     int64
}

type model struct {
	t    *testing.T
	m    map[string]*mrec
	keys []string
	ops  map[string]int
	fail int
}

// at classifies r for a call whose script's now lies in [c0, c1]:
// 'a' absent, 'l' live, '?' either.
func at(r *mrec, c0, c1 int64) byte {
	switch {
	case r == nil || r.hi <= c0:
		return 'a'
	case r.lo > c1:
		return 'l'
	}
	return '?'
}

func (md *model) errorf(format string, args ...any) {
	md.t.Helper()
	md.fail++
	if md.fail <= 30 {
		md.t.Errorf(format, args...)
	}
}

func ceilMs(us int64) int64 { return max((us+999)/1000, 1) }

// hit applies a Hit's answer res (made in [c0, c1], pending TTL pt µs).
func (md *model) hit(k, hook string, pt int64, res fleetstore.Result, c0, c1 int64) {
	md.t.Helper()
	r := md.m[k]
	cls := at(r, c0, c1)
	newPending := &mrec{st: 'p', hook: hook, lo: c0 + pt, hi: c1 + pt, pt: pt}
	liveOK := func() bool { // is res what a live r answers?
		switch {
		case r.st == 'p' && r.hook == hook:
			return res.Outcome == fleetstore.OK
		case r.st == 'p':
			if res.Outcome != fleetstore.Pending {
				return false
			}
			ms := res.RetryAfter.Milliseconds()
			return ms >= ceilMs(r.lo-c1) && ms <= ceilMs(r.hi-c0) && ms <= ceilMs(r.pt)
		default:
			return res.Outcome == fleetstore.Duplicate && res.HookID == r.hook
		}
	}
	switch cls {
	case 'a':
		if res.Outcome != fleetstore.OK {
			md.errorf("key %s hook %s: absent (model %+v), Hit %v %q %v", k, hook, r, res.Outcome, res.HookID, res.RetryAfter)
		}
		md.m[k] = newPending
	case 'l':
		if !liveOK() {
			md.errorf("key %s hook %s: live %+v (now %d..%d), Hit %v %q %v", k, hook, *r, c0, c1, res.Outcome, res.HookID, res.RetryAfter)
		}
	case '?':
		if res.Outcome == fleetstore.OK {
			if r.st == 'p' && r.hook == hook {
				md.m[k] = &mrec{st: 'p', hook: hook, lo: r.lo, hi: max(r.hi, newPending.hi), pt: max(r.pt, pt)}
			} else {
				md.m[k] = newPending
			}
		} else if !liveOK() {
			md.errorf("key %s hook %s: maybe live %+v, Hit %v %q %v", k, hook, *r, res.Outcome, res.HookID, res.RetryAfter)
		}
	}
}

// settle applies a Commit (commit) or Release's error e for claim k.
func (md *model) settle(commit bool, k, hook string, ttl int64, e error, c0, c1 int64) {
	md.t.Helper()
	r := md.m[k]
	cls := at(r, c0, c1)
	committed := &mrec{st: 'c', hook: hook, lo: c0 + ttl, hi: c1 + ttl}
	var lost *fleetstore.ClaimLostError
	isLost := errors.As(e, &lost)
	bad := func(why string) {
		md.t.Helper()
		md.errorf("key %s hook %s commit=%v: %s; model %+v (now %d..%d), got %v", k, hook, commit, why, r, c0, c1, e)
	}
	live := cls == 'l' || cls == '?'
	// What a live r answers.
	liveAnswer := func() (ok bool, apply func()) {
		switch {
		case r.hook != hook:
			return isLost && lost.Holder == r.hook, func() {}
		case commit && r.st == 'p':
			return e == nil, func() { md.m[k] = committed }
		case commit:
			return e == nil, func() {}
		case r.st == 'p':
			return e == nil, func() { md.m[k] = nil }
		default:
			return errors.Is(e, fleetstore.ErrAlreadyCommitted), func() {}
		}
	}
	absentAnswer := func() (ok bool, apply func()) {
		if commit {
			return e == nil, func() { md.m[k] = committed }
		}
		return e == nil, func() { md.m[k] = nil }
	}
	if live {
		if ok, apply := liveAnswer(); ok {
			if cls == '?' && commit && r.hook == hook && r.st == 'c' {
				// live: unchanged; expired: recommitted.
				md.m[k] = &mrec{st: 'c', hook: hook, lo: r.lo, hi: max(r.hi, committed.hi)}
				return
			}
			if cls == '?' && !commit && r.hook == hook && r.st == 'c' {
				return // ErrAlreadyCommitted: it was live
			}
			apply()
			return
		}
		if cls == 'l' {
			bad("live answer expected")
			return
		}
	}
	if ok, apply := absentAnswer(); ok {
		apply()
		return
	}
	bad("absent answer expected")
}

// claimErrs maps a batch's joined errors to their claims' indexes.
func claimErrs(err error) map[int]error {
	out := map[int]error{}
	if err == nil {
		return out
	}
	var list []error
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		list = u.Unwrap()
	} else {
		list = []error{err}
	}
	for _, e := range list {
		var ce *fleetstore.ClaimError
		if errors.As(e, &ce) {
			out[ce.Index] = ce.Err
		} else {
			out[-1] = e
		}
	}
	return out
}

func hookFor(k string, i int) string {
	switch i {
	case 0:
		return "a-" + k
	case 1:
		return "b-" + k
	}
	return "L" + strings.Repeat("x", 60) + "-" + k // > 56 bytes: the short key
}

// stress runs random Hits, Commits and Releases of one tenant against the
// model for d.
func stress(t *testing.T, st *fleetstore.Store, admin goredis.UniversalClient, prefix, tenant string, md *model, nkeys int, d time.Duration, seed uint64) {
	rnd := mrand.New(mrand.NewPCG(seed, 1))
	ttls := []time.Duration{200 * time.Millisecond, 700 * time.Millisecond, 2 * time.Second, 6 * time.Second}
	pick := func() string {
		if len(md.keys) > 0 && rnd.IntN(2) == 0 {
			return md.keys[rnd.IntN(len(md.keys))]
		}
		k := "evt-" + strconv.Itoa(rnd.IntN(nkeys))
		if _, ok := md.m[k]; !ok {
			md.m[k] = nil
			md.keys = append(md.keys, k)
		}
		return k
	}
	mk := func(k string) fleetstore.Claim {
		h := hookFor(k, rnd.IntN(3))
		if rnd.IntN(4) != 0 {
			h = hookFor(k, rnd.IntN(2))
		}
		return fleetstore.Claim{Tenant: tenant, SourceID: "src", Key: k, HookID: h, Node: "n",
			TTL: ttls[rnd.IntN(len(ttls))], PendingTTL: ttls[rnd.IntN(len(ttls))]}
	}
	start := time.Now()
	burst := time.Now()
	sweep := -1
	for time.Since(start) < d {
		if sweep < 0 && time.Since(burst) > 1500*time.Millisecond {
			// Idle, so that shards can expire, then look at every key.
			time.Sleep(time.Duration(200+rnd.IntN(2300)) * time.Millisecond)
			sweep = 0
			md.ops["sweeps"]++
		}
		op := rnd.IntN(10)
		if sweep >= 0 {
			op = 0
		}
		switch {
		case op < 5:
			var k string
			if sweep >= 0 {
				k = md.keys[sweep]
				if sweep++; sweep == len(md.keys) {
					sweep = -1
					burst = time.Now()
				}
			} else {
				k = pick()
			}
			c := mk(k)
			c0 := serverMicros(t, admin)
			res, err := st.Hit(ctx(t), nil, &c)
			c1 := serverMicros(t, admin)
			if err != nil {
				t.Fatalf("hit: %v", err)
			}
			md.ops["hit"]++
			md.hit(k, c.HookID, c.PendingTTL.Microseconds(), res, c0, c1)
		default:
			commit := op < 8
			n := 1 + rnd.IntN(4)
			seen := map[string]bool{}
			var batch []fleetstore.Claim
			for range n {
				k := pick()
				if seen[k] {
					continue
				}
				seen[k] = true
				batch = append(batch, mk(k))
			}
			c0 := serverMicros(t, admin)
			var err error
			if commit {
				err = st.Commit(ctx(t), batch...)
			} else {
				err = st.Release(ctx(t), batch...)
			}
			c1 := serverMicros(t, admin)
			errs := claimErrs(err)
			if e, ok := errs[-1]; ok {
				t.Fatalf("settle: %v", e)
			}
			for i, c := range batch {
				md.ops[map[bool]string{true: "commit", false: "release"}[commit]]++
				md.settle(commit, c.Key, c.HookID, c.TTL.Microseconds(), errs[i], c0, c1)
			}
		}
		if md.fail > 30 {
			t.Fatalf("too many failures")
		}
	}
}

// noKeyWithoutExpiry checks every key of tenant has an expiry.
func noKeyWithoutExpiry(t *testing.T, admin goredis.UniversalClient, prefix, tenant string) {
	t.Helper()
	keys, err := admin.Keys(ctx(t), scripts.TenantPattern(prefix, tenant)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl, _ := admin.PTTL(ctx(t), k).Result(); ttl == -1 {
			t.Errorf("key %q has no expiry", k)
		}
	}
}

func stressDuration() time.Duration {
	if v := os.Getenv("FLEETSTORE_CLAIM_STRESS"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return 4 * time.Second
}

func TestClaimStressNew(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	md := &model{t: t, m: map[string]*mrec{}, ops: map[string]int{}}
	stress(t, st, admin, prefix, tenant, md, 3000, stressDuration(), uint64(time.Now().UnixNano()))
	l, p, _ := tenantState(t, admin, scripts.ShardKey(prefix, tenant, 0))
	t.Logf("ops %v; keys %d; tenant l %d p %d", md.ops, len(md.keys), l, p)
	noKeyWithoutExpiry(t, admin, prefix, tenant)
}
