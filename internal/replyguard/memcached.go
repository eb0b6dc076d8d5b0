package replyguard

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// mcParser reads memcached text-protocol replies: a VALUE line is followed
// by its data; every other line (END, STORED, VERSION …) ends a reply.
type mcParser struct{}

var valuePrefix = []byte("VALUE ")

// header implements protocol.
func (mcParser) header(line []byte) (int64, bool, error) {
	if !bytes.HasPrefix(line, valuePrefix) {
		return 0, true, nil
	}
	// VALUE <key> <flags> <bytes> [<cas>]
	f := bytes.Fields(line)
	if len(f) < 4 {
		return 0, false, errors.New("a malformed VALUE line")
	}
	n, err := strconv.ParseInt(string(f[3]), 10, 64)
	if err != nil || n < 0 || n > MaxBulk {
		return 0, false, fmt.Errorf("a VALUE of %q bytes (at most %d)", cut(f[3]), MaxBulk)
	}
	return n + 2, false, nil
}

// payloadEnd implements protocol: a get's reply ends with END.
func (mcParser) payloadEnd() bool { return false }
