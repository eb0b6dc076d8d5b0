package outboxlog

import (
	"bytes"
	"os"
	"testing"
)

// FuzzDecodePayload: any bytes decode to an error or to a payload whose
// encoding is those very bytes (the format is canonical), never a panic.
func FuzzDecodePayload(f *testing.F) {
	for i := range 3 {
		r := rec(i)
		r.Seq = uint64(i + 1)
		f.Add(appendCommit(nil, &r))
	}
	f.Add(appendAck(nil, []uint64{1, 300, 1 << 62}))
	f.Add([]byte{kindCommit, 0x80, 0x00})
	f.Add([]byte{kindAck, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePayload(b)
		if err != nil {
			return
		}
		var again []byte
		switch p.kind {
		case kindCommit:
			if check(&p.rec.Claim) != nil {
				t.Fatalf("decoded a claim Append refuses: %+v", p.rec)
			}
			again = appendCommit(nil, &p.rec)
		case kindAck:
			again = appendAck(nil, p.acks)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, p, again)
		}
	})
}

// FuzzOpen: a segment of any bytes after the header opens without a
// panic, is cut at most once, and opens again to the same records.
func FuzzOpen(f *testing.F) {
	var seg []byte
	for i := range 4 {
		r := rec(i)
		r.Seq = uint64(i + 1)
		seg = appendFrame(seg, func(b []byte) []byte { return appendCommit(b, &r) })
	}
	seg = appendFrame(seg, func(b []byte) []byte { return appendAck(b, []uint64{2}) })
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(segPath(dir, 1), append([]byte(magic), body...), 0o600); err != nil {
			t.Fatal(err)
		}
		l, first, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		_ = l.Close()
		logger, logs := observed()
		l, again, err := Open(dir, Options{Logger: logger})
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		_ = l.Close()
		if logs.Len() != 0 {
			t.Fatalf("second Open cut again: %v", logs.All())
		}
		sameRecords(t, again, first)
	})
}
