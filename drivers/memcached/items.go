package memcached

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
)

// A bucket item holds every kind's TAT and every calendar quota window's
// count of one tenant, as text:
//
//	1 hooks:1790000000123456 bytes:1790000000100000 hooks@1788220800000000-1790812800000000=42
//
// the format version, then kind:TAT (µs, client wall clock) pairs and
// kind@start-end=used windows (start and end in µs, used in units). A
// window is keyed by its kind and start (CONTRACT §3.2): the item holds
// a kind's TAT and its windows apart, and a quota's count in the window
// before and the one after for as long as they last.

// kindTAT is one bucket of a tenant.
type kindTAT struct {
	kind string
	tat  int64 // µs
}

// kindWindow is one quota window of a tenant: used units counted in
// [start, end) µs.
type kindWindow struct {
	kind       string
	start, end int64
	used       int64
}

// bucketState is a bucket item's content.
type bucketState struct {
	tats []kindTAT
	wins []kindWindow
}

const bucketVersion = "1"

func parseBucket(v []byte) (bucketState, error) {
	fields := bytes.Fields(v)
	if len(fields) == 0 || string(fields[0]) != bucketVersion {
		return bucketState{}, errors.New("bucket item: unknown format")
	}
	var out bucketState
	out.tats = make([]kindTAT, 0, len(fields)-1)
	for _, f := range fields[1:] {
		if k, w, ok := bytes.Cut(f, []byte{'@'}); ok {
			win, err := parseWindow(k, w)
			if err != nil {
				return bucketState{}, err
			}
			for _, kw := range out.wins {
				if kw.kind == win.kind && kw.start == win.start {
					return bucketState{}, errors.New("bucket item: window twice")
				}
			}
			out.wins = append(out.wins, win)
			continue
		}
		k, t, ok := bytes.Cut(f, []byte{':'})
		if !ok || !validKind(k) {
			return bucketState{}, errors.New("bucket item: malformed kind")
		}
		tat, err := strconv.ParseInt(string(t), 10, 64)
		if err != nil || tat < 0 {
			return bucketState{}, errors.New("bucket item: malformed TAT")
		}
		for _, kt := range out.tats {
			if kt.kind == string(k) {
				return bucketState{}, errors.New("bucket item: kind twice")
			}
		}
		out.tats = append(out.tats, kindTAT{kind: string(k), tat: tat})
	}
	return out, nil
}

// parseWindow reads a window's "start-end=used" w of kind k.
func parseWindow(k, w []byte) (kindWindow, error) {
	bad := errors.New("bucket item: malformed window")
	if !validKind(k) {
		return kindWindow{}, bad
	}
	se, u, ok := bytes.Cut(w, []byte{'='})
	if !ok {
		return kindWindow{}, bad
	}
	s, e, ok := bytes.Cut(se, []byte{'-'})
	if !ok {
		return kindWindow{}, bad
	}
	start, err1 := strconv.ParseInt(string(s), 10, 64)
	end, err2 := strconv.ParseInt(string(e), 10, 64)
	used, err3 := strconv.ParseInt(string(u), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || start < 0 || end <= start || used < 0 ||
		used > driver.MaxWindowUnits {
		return kindWindow{}, bad
	}
	return kindWindow{kind: string(k), start: start, end: end, used: used}, nil
}

func validKind(k []byte) bool {
	if len(k) == 0 || len(k) > 32 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for _, c := range k[1:] {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// encodeBucket writes b, leaving out the TATs and windows that have
// passed at now (a passed TAT is a full bucket, the same as no TAT; a
// passed window is never counted in again).
func encodeBucket(b bucketState, now int64) []byte {
	out := make([]byte, 0, 1+len(b.tats)*28+len(b.wins)*60)
	out = append(out, bucketVersion...)
	for _, kt := range b.tats {
		if kt.tat <= now {
			continue
		}
		out = append(out, ' ')
		out = append(out, kt.kind...)
		out = append(out, ':')
		out = strconv.AppendInt(out, kt.tat, 10)
	}
	for _, w := range b.wins {
		if w.end <= now {
			continue
		}
		out = append(out, ' ')
		out = append(out, w.kind...)
		out = append(out, '@')
		out = strconv.AppendInt(out, w.start, 10)
		out = append(out, '-')
		out = strconv.AppendInt(out, w.end, 10)
		out = append(out, '=')
		out = strconv.AppendInt(out, w.used, 10)
	}
	return out
}

// until is when b has passed entirely at the latest: its largest TAT or
// window end (µs), the bucket item's expiry.
func (b bucketState) until() int64 {
	var u int64
	for _, kt := range b.tats {
		u = max(u, kt.tat)
	}
	for _, w := range b.wins {
		u = max(u, w.end)
	}
	return u
}

// A claim item is binary, 10 bytes and the raw hook_id and node bytes:
//
//	byte 0     the state: 'p' pending, 'c' committed
//	bytes 1–8  when the claim expires: µs, client wall clock, big-endian
//	uvarint    len(hook_id), 1–256: one byte below 128, else two
//	the rest   hook_id, then node
//
// A zero-length value is the tombstone a release leaves (it is written
// already expired).

// claimHead is the bytes of a claim item before its hook_id when the
// hook_id is shorter than 128 bytes.
const claimHead = 1 + 8 + 1

func encodeClaim(r claim.State) []byte {
	b := make([]byte, 0, claimHead+1+len(r.HookID)+len(r.Node))
	state := byte('p')
	if r.Phase == claim.Committed {
		state = 'c'
	}
	b = append(b, state)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Expires))
	b = binary.AppendUvarint(b, uint64(len(r.HookID)))
	b = append(b, r.HookID...)
	return append(b, r.Node...)
}

// parseClaim decodes a claim item; the tombstone is absent.
func parseClaim(v []byte) (r claim.State, err error) {
	if len(v) == 0 {
		return r, nil
	}
	if len(v) < claimHead {
		return r, errors.New("claim item: unknown format")
	}
	switch v[0] {
	case 'p':
		r.Phase = claim.Pending
	case 'c':
		r.Phase = claim.Committed
	default:
		return claim.State{}, errors.New("claim item: unknown state")
	}
	r.Expires = int64(binary.BigEndian.Uint64(v[1:9]))
	if r.Expires < 0 {
		return claim.State{}, errors.New("claim item: malformed expiry")
	}
	n, w := binary.Uvarint(v[9:])
	rest := v[9+max(w, 0):]
	if w <= 0 || n < 1 || n > uint64(len(rest)) {
		return claim.State{}, errors.New("claim item: malformed hook_id length")
	}
	r.HookID, r.Node = string(rest[:n]), string(rest[n:])
	return r, nil
}

// malformed is the error of an item this driver cannot read (V4).
func malformed(key string, err error) error {
	return driver.ErrorReply(fmt.Errorf("memcached: item %s: %w", key, err))
}
