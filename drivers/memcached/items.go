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

// A bucket item holds every kind's TAT of one tenant, as text:
//
//	1 hooks:1790000000123456 bytes:1790000000100000
//
// the format version, then kind:TAT (µs, client wall clock) pairs.

// kindTAT is one bucket of a tenant.
type kindTAT struct {
	kind string
	tat  int64 // µs
}

const bucketVersion = "1"

func parseBucket(v []byte) ([]kindTAT, error) {
	fields := bytes.Fields(v)
	if len(fields) == 0 || string(fields[0]) != bucketVersion {
		return nil, errors.New("bucket item: unknown format")
	}
	out := make([]kindTAT, 0, len(fields)-1)
	for _, f := range fields[1:] {
		k, t, ok := bytes.Cut(f, []byte{':'})
		if !ok || !validKind(k) {
			return nil, errors.New("bucket item: malformed kind")
		}
		tat, err := strconv.ParseInt(string(t), 10, 64)
		if err != nil || tat < 0 {
			return nil, errors.New("bucket item: malformed TAT")
		}
		for _, kt := range out {
			if kt.kind == string(k) {
				return nil, errors.New("bucket item: kind twice")
			}
		}
		out = append(out, kindTAT{kind: string(k), tat: tat})
	}
	return out, nil
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

// encodeBucket writes tats, leaving out those that have passed (a passed
// TAT is a full bucket, the same as no TAT).
func encodeBucket(tats []kindTAT, now int64) []byte {
	b := make([]byte, 0, 1+len(tats)*28)
	b = append(b, bucketVersion...)
	for _, kt := range tats {
		if kt.tat <= now {
			continue
		}
		b = append(b, ' ')
		b = append(b, kt.kind...)
		b = append(b, ':')
		b = strconv.AppendInt(b, kt.tat, 10)
	}
	return b
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
