package replyguard

import (
	"bytes"
	"fmt"
	"strconv"
)

// mcParser follows a memcached text-protocol reply stream.
type mcParser struct {
	payload int64 // bytes of a VALUE's data (with its CRLF) still to pass
	inReply int64 // bytes since the last line that ends a reply
}

var valuePrefix = []byte("VALUE ")

func (p *mcParser) feed(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		if p.payload > 0 {
			n := min(p.payload, int64(len(b)-done))
			p.payload -= n
			if err := p.count(n); err != nil {
				return done, err
			}
			done += int(n)
			continue
		}
		rest := b[done:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			if len(rest) > MaxLine {
				return done, fmt.Errorf("a line longer than %d bytes", MaxLine)
			}
			return done, nil
		}
		line := rest[:end+1]
		if len(line) > MaxLine {
			return done, fmt.Errorf("a line longer than %d bytes", MaxLine)
		}
		if err := p.count(int64(len(line))); err != nil {
			return done, err
		}
		if bytes.HasPrefix(line, valuePrefix) {
			// VALUE <key> <flags> <bytes> [<cas>]
			f := bytes.Fields(line)
			if len(f) < 4 {
				return done, fmt.Errorf("a malformed VALUE line")
			}
			n, err := strconv.ParseInt(string(f[3]), 10, 64)
			if err != nil || n < 0 || n > MaxBulk {
				return done, fmt.Errorf("a VALUE of %q bytes (at most %d)", cut(f[3]), MaxBulk)
			}
			p.payload = n + 2
		} else {
			p.inReply = 0 // END, STORED, VERSION …: a reply ends
		}
		done += len(line)
	}
	return done, nil
}

func (p *mcParser) count(n int64) error {
	p.inReply += n
	if p.inReply > MaxReply {
		return fmt.Errorf("a reply longer than %d bytes", MaxReply)
	}
	return nil
}
