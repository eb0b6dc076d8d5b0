package outboxlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// A segment is a header (magic) and then frames, each
//
//	length  uint32, little-endian: the payload's bytes, 1–maxPayload
//	crc     uint32, little-endian: CRC-32C (Castagnoli) of the payload
//	payload kind byte, then
//	  kindCommit: seq, queued-at (Unix µs, zig-zag), TTL (ns), then Tenant,
//	              SourceID, Key, HookID, Node, each a length and its bytes
//	  kindAck:    a count, then that many seqs
//
// every integer a varint (encoding/binary). A payload is canonical: the
// decoder takes exactly what the encoder writes and nothing else.
const (
	magic       = "fsoutbx1"
	frameHeader = 8
	kindCommit  = 1
	kindAck     = 2

	// The limits of driver.Claim (CONTRACT §6), which the decoder holds
	// a record to and Append checks.
	maxIDLen   = driver.MaxPartLen   // Tenant, SourceID, Key
	maxHookLen = driver.MaxHookIDLen // HookID, Node (driver.MaxNodeLen)
	minTTL     = driver.MinTTL
	maxTTL     = driver.MaxTTL

	// maxAckSeqs is the most seqs one ack frame holds: Ack splits longer
	// lists. maxPayload bounds a frame's length before it is read.
	maxAckSeqs = 4096
	maxPayload = 1 + maxAckSeqs*binary.MaxVarintLen64 + binary.MaxVarintLen64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks a frame or payload that the encoder cannot have
// written: a torn write or a damaged disk.
var errCorrupt = errors.New("corrupt record")

// Record is one commit queued in the log.
type Record struct {
	// Seq is the record's number, set by Append: increasing in the order
	// Append queued them, never 0. Ack takes it.
	Seq uint64
	// Claim is the commit's claim: Tenant, SourceID, Key, HookID, Node and
	// TTL are kept; PendingTTL is not (a commit does not need it).
	Claim driver.Claim
	// QueuedAt is when the commit was queued, by the wall clock; kept to
	// the microsecond (time.UnixMicro), so that a replay after a restart
	// gives the claim the expiry the commit gave it.
	QueuedAt time.Time
}

// check reports the first field of c outside driver.Claim's limits, as
// an error naming it.
func check(c *driver.Claim) error {
	for _, f := range [...]struct {
		name     string
		val      string
		min, max int
	}{
		{"Tenant", c.Tenant, 1, maxIDLen},
		{"SourceID", c.SourceID, 1, maxIDLen},
		{"Key", c.Key, 1, maxIDLen},
		{"HookID", c.HookID, 1, maxHookLen},
		{"Node", c.Node, 0, maxHookLen},
	} {
		if len(f.val) < f.min || len(f.val) > f.max {
			return fmt.Errorf("outboxlog: claim.%s: %d bytes, want %d–%d",
				f.name, len(f.val), f.min, f.max)
		}
	}
	if c.TTL < minTTL || c.TTL > maxTTL {
		return fmt.Errorf("outboxlog: claim.TTL: %v, want 1ms–366 days", c.TTL)
	}
	return nil
}

// appendFrame appends one frame around the payload that put appends.
func appendFrame(b []byte, put func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeader)...)
	b = put(b)
	p := b[start+frameHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(p, castagnoli))
	return b
}

// appendCommit appends r's payload (its claim checked beforehand).
func appendCommit(b []byte, r *Record) []byte {
	b = append(b, kindCommit)
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendVarint(b, r.QueuedAt.UnixMicro())
	b = binary.AppendUvarint(b, uint64(r.Claim.TTL))
	for _, s := range [...]string{r.Claim.Tenant, r.Claim.SourceID, r.Claim.Key,
		r.Claim.HookID, r.Claim.Node} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// appendAck appends the payload of an ack of seqs (≤ maxAckSeqs).
func appendAck(b []byte, seqs []uint64) []byte {
	b = append(b, kindAck)
	b = binary.AppendUvarint(b, uint64(len(seqs)))
	for _, s := range seqs {
		b = binary.AppendUvarint(b, s)
	}
	return b
}

// payload is a decoded payload: a commit (rec) or an ack (acks).
type payload struct {
	kind byte
	rec  Record
	acks []uint64
}

// decoder reads a payload's fields, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) || d.err != nil {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 || n != uvarintLen(uint64(v)<<1^uint64(v>>63)) || d.err != nil {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(lo, hi int) string {
	n := d.uvarint()
	if d.err != nil || n < uint64(lo) || n > uint64(hi) || n > uint64(len(d.b)) {
		d.err = errCorrupt
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// uvarintLen is the length of v's (shortest) varint encoding: the
// decoder takes no longer one.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// decodePayload decodes one payload, or returns errCorrupt for anything
// the encoder does not write: it never panics on any input.
func decodePayload(b []byte) (payload, error) {
	if len(b) == 0 {
		return payload{}, errCorrupt
	}
	p := payload{kind: b[0]}
	d := decoder{b: b[1:]}
	switch p.kind {
	case kindCommit:
		r := &p.rec
		r.Seq = d.uvarint()
		r.QueuedAt = time.UnixMicro(d.varint())
		r.Claim.TTL = time.Duration(d.uvarint())
		r.Claim.Tenant = d.str(1, maxIDLen)
		r.Claim.SourceID = d.str(1, maxIDLen)
		r.Claim.Key = d.str(1, maxIDLen)
		r.Claim.HookID = d.str(1, maxHookLen)
		r.Claim.Node = d.str(0, maxHookLen)
		if d.err == nil && (r.Seq == 0 || r.Claim.TTL < minTTL || r.Claim.TTL > maxTTL) {
			d.err = errCorrupt
		}
	case kindAck:
		n := d.uvarint()
		if d.err == nil && (n == 0 || n > maxAckSeqs) {
			d.err = errCorrupt
		}
		if d.err == nil {
			p.acks = make([]uint64, 0, n)
		}
		for range n {
			if s := d.uvarint(); d.err == nil && s != 0 {
				p.acks = append(p.acks, s)
			} else {
				d.err = errCorrupt
				break
			}
		}
	default:
		d.err = errCorrupt
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt // trailing bytes
	}
	if d.err != nil {
		return payload{}, d.err
	}
	return p, nil
}

// nextFrame reads the frame at the start of b: its payload and its
// length in b. ok is false when b holds no whole, valid frame there (a
// torn or corrupt tail, or the end).
func nextFrame(b []byte) (p payload, n int, ok bool) {
	if len(b) < frameHeader {
		return payload{}, 0, false
	}
	size := binary.LittleEndian.Uint32(b)
	if size == 0 || size > maxPayload || uint64(len(b)-frameHeader) < uint64(size) {
		return payload{}, 0, false
	}
	body := b[frameHeader : frameHeader+int(size)]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return payload{}, 0, false
	}
	p, err := decodePayload(body)
	if err != nil {
		return payload{}, 0, false
	}
	return p, frameHeader + int(size), true
}
