package outboxlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const segExt = ".seg"

// segment is one file of the log: its id (its name, in hex) orders it.
// Records live in it until acknowledged; the log deletes a segment once
// it and every older one hold no live record.
type segment struct {
	id   uint64
	size int64 // bytes in the file, its header included
	live int   // records in it not yet acknowledged
}

func lockPath(dir string) string { return filepath.Join(dir, "LOCK") }

func segPath(dir string, id uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016x%s", id, segExt))
}

// listSegments returns the ids of the directory's segment files, oldest
// first; other files are left alone.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outboxlog: %w", err)
	}
	var ids []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), segExt)
		if !ok || len(name) != 16 || !e.Type().IsRegular() {
			continue
		}
		if id, err := strconv.ParseUint(name, 16, 64); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// createSegment creates segment id with its header, durably: the file
// and its directory entry are synced before a record goes in.
func createSegment(dir string, id uint64) (*os.File, error) {
	f, err := os.OpenFile(segPath(dir, id), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("outboxlog: %w", err)
	}
	if _, err = f.WriteString(magic); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("outboxlog: create segment: %w", err)
	}
	return f, nil
}

// syncDir makes the directory's entries (a created or removed segment)
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// scan reads data, a segment's bytes, handing each whole frame to each
// (its payload and its bytes, header included), up to the first frame
// that is torn or fails its checksum or decoding: nothing after it is
// trusted. valid is where the whole frames end. A header shorter than
// magic but a prefix of it is a segment torn at its creation (valid 0:
// nothing in it); any other header is an error.
func scan(data []byte, each func(p *payload, raw []byte)) (valid int, err error) {
	if len(data) < len(magic) {
		if !bytes.HasPrefix([]byte(magic), data) {
			return 0, errNotSegment
		}
		return 0, nil
	}
	if string(data[:len(magic)]) != magic {
		return 0, errNotSegment
	}
	valid = len(magic)
	for valid < len(data) {
		p, n, ok := nextFrame(data[valid:])
		if !ok {
			break
		}
		each(&p, data[valid:valid+n])
		valid += n
	}
	return valid, nil
}
