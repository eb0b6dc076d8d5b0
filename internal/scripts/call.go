package scripts

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// HitCall returns the KEYS and ARGV of a Hit script call: charges (all of
// one tenant) and claim (nil: none), as validated by the Store. A GCRA
// charge goes as its TATField, its increment and capacity in whole µs; a
// window charge (CONTRACT §3.2) as its WindowField, its cost, its max and
// its four edges (µs). The pending TTL goes as whole µs (the record's
// exact expiry; its key's expiry is that µs rounded up to the ms). Its
// keys are the tenant's shard 0 (ShardKey, i = 0), then with a claim its
// ClaimKey (whose tag names the tenant's other shards); all of them, the
// fields and the numbers are built in one buffer (callBuf): two
// allocations in all.
func HitCall(
	keyPrefix string, charges []driver.Charge, claim *driver.Claim,
) (keys, args []string) {
	tenant := ""
	if len(charges) > 0 {
		tenant = charges[0].Tenant
	} else {
		tenant = claim.Tenant
	}
	nKeys, n := 1, 1+1
	size := tagLen(keyPrefix, tenant) + len(":s0") + numLen
	for i := range charges {
		size += tatFieldLen(charges[i].Kind)
		if charges[i].IsWindow() {
			n, size = n+7, size+6*numLen
		} else {
			n, size = n+3, size+2*numLen
		}
	}
	if claim != nil {
		tag := tagLen(keyPrefix, claim.Tenant)
		nKeys, n, size = 2, n+1+2, size+tag+DigestSize+numLen
	}
	c := newCallBuf(n, size)
	c.tagged(keyPrefix, tenant, ":s0")
	if claim != nil {
		c.claimKey(keyPrefix, claim.Tenant, claim.SourceID, claim.Key)
	}
	c.int(int64(len(charges)))
	for i := range charges {
		ch := &charges[i]
		if ch.IsWindow() {
			c.field(ch.Kind, '#')
			c.int(ch.Window.Cost)
			c.int(ch.Window.Max)
			for _, e := range ch.Window.Edges {
				c.int(e)
			}
			continue
		}
		c.field(ch.Kind, ':')
		c.int(ch.Increment.Microseconds())
		c.int(ch.Capacity.Microseconds())
	}
	if claim != nil {
		c.given(claim.HookID)
		c.micros(claim.PendingTTL)
	}
	return c.done(nKeys)
}

// Windows returns which of charges are window charges (CONTRACT §3.2):
// bit i for charges[i]. DecodeHit and DecodePeek take it.
func Windows(charges []driver.Charge) uint8 {
	var w uint8
	for i := range charges {
		if charges[i].IsWindow() {
			w |= 1 << i
		}
	}
	return w
}

// SettleCall returns the KEYS and ARGV of a Settle script call over claims:
// a commit when commit is true, a release otherwise; one key per claim
// (its ClaimKey), its hook_id and TTL in whole µs (rounded up: a claim
// never expires early, C9). On a cluster, every claim of one call must
// hash to one slot (one tenant does).
func SettleCall(
	keyPrefix string, commit bool, claims []driver.Claim,
) (keys, args []string) {
	size := 0
	for i := range claims {
		size += tagLen(keyPrefix, claims[i].Tenant) + DigestSize + numLen
	}
	c := newCallBuf(1+3*len(claims), size)
	for i := range claims {
		cl := &claims[i]
		c.claimKey(keyPrefix, cl.Tenant, cl.SourceID, cl.Key)
	}
	if commit {
		c.given("c")
	} else {
		c.given("r")
	}
	for i := range claims {
		c.given(claims[i].HookID)
		c.micros(claims[i].TTL)
	}
	return c.done(len(claims))
}

// PresentCall returns the KEYS of a Present script call over claims (no
// ARGV): one key per claim, as SettleCall's.
func PresentCall(keyPrefix string, claims []driver.Claim) []string {
	keys := make([]string, len(claims))
	for i := range claims {
		c := &claims[i]
		keys[i] = ClaimKey(keyPrefix, c.Tenant, c.SourceID, c.Key)
	}
	return keys
}

// PeekCall returns the KEYS and ARGV of a Peek script call over charges
// (1 to driver.MaxCharges, all of one tenant, as validated by the Store):
// the tenant's shard 0 (ShardKey, i = 0), and each charge's TATField, or
// a window charge's WindowField and its four edges (µs).
func PeekCall(keyPrefix string, charges []driver.Charge) (keys, args []string) {
	args = make([]string, 0, 5*len(charges))
	for i := range charges {
		ch := &charges[i]
		if !ch.IsWindow() {
			args = append(args, TATField(ch.Kind))
			continue
		}
		args = append(args, WindowField(ch.Kind))
		for _, e := range ch.Window.Edges {
			args = append(args, strconv.FormatInt(e, 10))
		}
	}
	return []string{ShardKey(keyPrefix, charges[0].Tenant, 0)}, args
}

// ResetCall returns the KEYS of a Reset script call (no ARGV): the
// tenant's shard 0, which holds its TATs.
func ResetCall(keyPrefix, tenant string) []string {
	return []string{ShardKey(keyPrefix, tenant, 0)}
}

// micros is d in whole µs, rounded up, at least 1.
func micros(d time.Duration) int64 {
	return max(int64((d+time.Microsecond-1)/time.Microsecond), 1)
}

// ErrMalformed is the error of a reply that is not what the script
// returns (CONTRACT V4). It never panics the caller.
var ErrMalformed = errors.New("malformed script reply")

// The result codes of hit.lua.
const (
	hitOK          = 1
	hitDuplicate   = 2
	hitPending     = 3
	hitRateLimited = 4
)

// DecodeHit turns the Hit script's reply to a Hit of n charges, windows
// its window charges (Windows), into a Result with its n bucket states
// (G10). The reply is {code, value, r_1, …, r_n, u_1, …, u_w}, as []any of
// int64 and string: {1, 0, …} OK, {2, hook_id, …} Duplicate, {3, ms, …}
// Pending, {4, ms, …} RateLimited; each r_i a reset-after in µs (≥ 1 for
// a window), each u_j the count of the j-th window charge, its Used.
// Anything else is an error wrapping ErrMalformed (the driver marks it as
// the server's reply).
func DecodeHit(reply any, n int, windows uint8) (driver.Result, error) {
	a, ok := reply.([]any)
	nw := bits.OnesCount8(windows)
	if !ok || len(a) != 2+n+nw || n > driver.MaxCharges {
		return driver.Result{}, malformed("hit", reply)
	}
	code, ok := a[0].(int64)
	if !ok {
		return driver.Result{}, malformed("hit", reply)
	}
	var res driver.Result
	switch code {
	case hitOK:
		if v, ok := a[1].(int64); !ok || v != 0 {
			return driver.Result{}, malformed("hit", reply)
		}
		res.Outcome = driver.OK
	case hitDuplicate:
		hook, ok := a[1].(string)
		if !ok || hook == "" {
			return driver.Result{}, malformed("hit", reply)
		}
		res.Outcome, res.HookID = driver.Duplicate, hook
	case hitPending, hitRateLimited:
		ms, ok := a[1].(int64)
		if !ok || ms < 1 || ms > maxMillis {
			return driver.Result{}, malformed("hit", reply)
		}
		res.Outcome = driver.Pending
		if code == hitRateLimited {
			res.Outcome = driver.RateLimited
		}
		res.RetryAfter = time.Duration(ms) * time.Millisecond
	default:
		return driver.Result{}, malformed("hit", reply)
	}
	if !decodeBuckets(&res, a[2:], n, windows) {
		return driver.Result{}, malformed("hit", reply)
	}
	return res, nil
}

// decodeBuckets sets res's n bucket states from a, {r_1, …, r_n, u_1, …,
// u_w}: each r_i a reset-after in µs, at least 1 for a window charge (bit
// i of windows), whose Used is the next u_j. It reports whether a was
// such a reply.
func decodeBuckets(res *driver.Result, a []any, n int, windows uint8) bool {
	res.NBuckets = n
	j := n
	for i := range n {
		us, ok := a[i].(int64)
		if !ok || us < 0 || us > maxMicros {
			return false
		}
		res.Buckets[i].ResetAfter = time.Duration(us) * time.Microsecond
		if windows&(1<<i) == 0 {
			continue
		}
		used, ok := a[j].(int64)
		if !ok || us < 1 || used < 0 || used > driver.MaxWindowUnits {
			return false
		}
		res.Buckets[i].Used = used
		j++
	}
	return true
}

// DecodePeek turns the Peek script's reply to a Peek of n charges, windows
// its window charges ({r_1, …, r_n, u_1, …, u_w}, as DecodeHit's after
// its code and value), into a Result with its n bucket states (G10) and
// nothing else set: the Store derives the rest. Anything else is an error
// wrapping ErrMalformed.
func DecodePeek(reply any, n int, windows uint8) (driver.Result, error) {
	a, ok := reply.([]any)
	if !ok || len(a) != n+bits.OnesCount8(windows) || n > driver.MaxCharges {
		return driver.Result{}, malformed("peek", reply)
	}
	var res driver.Result
	if !decodeBuckets(&res, a, n, windows) {
		return driver.Result{}, malformed("peek", reply)
	}
	return res, nil
}

// maxMicros bounds a reset-after (a TAT is at most a capacity of 366 days
// ahead of the now that wrote it; twice that, with room) and how far ahead
// a claim record can expire (claim.lua's C.FAR, the same bound: a claim
// TTL is at most 366 days).
const maxMicros = 3 * 366 * 24 * 3600 * 1000 * 1000

// maxMillis bounds a retry-after: two capacities of 366 days, with room.
const maxMillis = 3 * 366 * 24 * 3600 * 1000

// DecodeSettle turns the Settle script's reply over n claims (a flat
// []any of code, holder pairs) into one error per claim: nil,
// *driver.ClaimLostError or driver.ErrAlreadyCommitted. A reply of the
// wrong shape is an error wrapping ErrMalformed (the driver marks it as the server's reply).
func DecodeSettle(reply any, n int) ([]error, error) {
	a, ok := reply.([]any)
	if !ok || len(a) != 2*n {
		return nil, malformed("settle", reply)
	}
	errs := make([]error, n)
	for i := range n {
		code, ok1 := a[2*i].(int64)
		holder, ok2 := a[2*i+1].(string)
		if !ok1 || !ok2 {
			return nil, malformed("settle", reply)
		}
		switch code {
		case 0:
		case 1:
			if holder == "" { // hook_ids are 1–256 bytes
				return nil, malformed("settle", reply)
			}
			errs[i] = &driver.ClaimLostError{Holder: holder}
		case 2:
			errs[i] = driver.ErrAlreadyCommitted
		default:
			return nil, malformed("settle", reply)
		}
	}
	return errs, nil
}

// malformed describes the reply's shape, never its contents (a reply may
// hold tenants' hook ids; the shape is enough to debug). A store that
// answers what no script returns is unavailable to the caller (V4): the
// driver marks the error as the server's reply.
func malformed(script string, reply any) error {
	return fmt.Errorf("%s: %w: got %s", script, ErrMalformed, shape(reply))
}

func shape(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case []any:
		s := "["
		for i, e := range v {
			if i == 4 {
				s += " …"
				break
			}
			if i > 0 {
				s += " "
			}
			s += shape(e)
		}
		return s + "]"
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return "string(" + strconv.Itoa(len(v)) + " bytes)"
	}
	return fmt.Sprintf("%T", v)
}

// RoundOp is one call in a Round script call: a Hit's KEYS and ARGV, as
// HitCall builds them, or a Settle's (Settle true), as SettleCall does.
type RoundOp struct {
	Settle     bool
	Keys, Args []string
}

// RoundCall returns the KEYS and ARGV of a Round script call over ops, in
// order (round.lua): every op's keys, then for each op its script ('h' or
// 's'), its number of keys and of arguments, and its arguments. On a
// cluster, every key must hash to one slot.
func RoundCall(ops []RoundOp) (keys, args []string) {
	nk, na := 0, 0
	for i := range ops {
		nk += len(ops[i].Keys)
		na += 3 + len(ops[i].Args)
	}
	keys, args = make([]string, 0, nk), make([]string, 0, na)
	for i := range ops {
		op := &ops[i]
		script := "h"
		if op.Settle {
			script = "s"
		}
		keys = append(keys, op.Keys...)
		args = append(args, script, strconv.Itoa(len(op.Keys)), strconv.Itoa(len(op.Args)))
		args = append(args, op.Args...)
	}
	return keys, args
}

// ScriptError is the error one call of a Round raised (a malformed value
// under the prefix, a command's error reply): that call's failure alone.
// Its text is the server's, as an error reply's.
type ScriptError struct{ Text string }

func (e *ScriptError) Error() string { return e.Text }

// DecodeRound splits the Round script's reply to a call of n ops into
// each op's reply, for DecodeHit or DecodeSettle, or *ScriptError where
// the op raised one. A reply of another shape is an error wrapping
// ErrMalformed.
func DecodeRound(reply any, n int) ([]any, error) {
	a, ok := reply.([]any)
	if !ok || len(a) != n {
		return nil, malformed("round", reply)
	}
	out := make([]any, n)
	for i, r := range a {
		switch r := r.(type) {
		case []any:
			out[i] = r
		case string:
			out[i] = &ScriptError{Text: r}
		default:
			return nil, malformed("round", reply)
		}
	}
	return out, nil
}
