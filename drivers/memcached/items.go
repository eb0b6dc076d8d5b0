package memcached

import (
	"bytes"
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

// A claim item is a header line and the raw hook_id and node bytes:
//
//	1 p 1790000000123456 6\nhook-anode-7
//
// the format version, the state (p pending, c committed), when the claim
// expires (µs, client wall clock) and len(hook_id). A zero-length value is
// the tombstone a release leaves (it is written already expired).

func encodeClaim(r claim.State) []byte {
	b := make([]byte, 0, 32+len(r.HookID)+len(r.Node))
	b = append(b, "1 p "...)
	if r.Phase == claim.Committed {
		b[2] = 'c'
	}
	b = strconv.AppendInt(b, r.Expires, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(r.HookID)), 10)
	b = append(b, '\n')
	b = append(b, r.HookID...)
	b = append(b, r.Node...)
	return b
}

// parseClaim decodes a claim item; the tombstone is absent.
func parseClaim(v []byte) (r claim.State, err error) {
	if len(v) == 0 {
		return r, nil
	}
	head, rest, found := bytes.Cut(v, []byte{'\n'})
	fields := bytes.Fields(head)
	if !found || len(fields) != 4 || string(fields[0]) != "1" {
		return r, errors.New("claim item: unknown format")
	}
	switch string(fields[1]) {
	case "p":
		r.Phase = claim.Pending
	case "c":
		r.Phase = claim.Committed
	default:
		return claim.State{}, errors.New("claim item: unknown state")
	}
	r.Expires, err = strconv.ParseInt(string(fields[2]), 10, 64)
	if err != nil {
		return claim.State{}, errors.New("claim item: malformed expiry")
	}
	n, err := strconv.Atoi(string(fields[3]))
	if err != nil || n < 1 || n > len(rest) {
		return claim.State{}, errors.New("claim item: malformed hook_id length")
	}
	r.HookID, r.Node = string(rest[:n]), string(rest[n:])
	return r, nil
}

// malformed is the error of an item this driver cannot read (V4).
func malformed(key string, err error) error {
	return driver.Reply(fmt.Errorf("memcached: item %s: %w", key, err))
}
