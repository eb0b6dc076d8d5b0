package replyguard

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// respParser follows a RESP2/RESP3 reply stream.
type respParser struct {
	payload int64   // bytes of the bulk payload (with its CRLF) still to pass
	stack   []int64 // elements still to come, per open aggregate
	inReply int64   // bytes of the current top-level reply so far
}

func (p *respParser) feed(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		if p.payload > 0 {
			n := min(p.payload, int64(len(b)-done))
			p.payload -= n
			if err := p.count(n); err != nil {
				return done, err
			}
			done += int(n)
			if p.payload == 0 {
				p.element()
			}
			continue
		}
		rest := b[done:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			if len(rest) > MaxLine {
				return done, fmt.Errorf("a line longer than %d bytes", MaxLine)
			}
			return done, nil // wait for the rest of the line
		}
		line := rest[:end+1]
		if len(line) > MaxLine {
			return done, fmt.Errorf("a line longer than %d bytes", MaxLine)
		}
		if err := p.count(int64(len(line))); err != nil {
			return done, err
		}
		if err := p.header(line); err != nil {
			return done, err
		}
		done += len(line)
	}
	return done, nil
}

// count adds n bytes to the current reply.
func (p *respParser) count(n int64) error {
	p.inReply += n
	if p.inReply > MaxReply {
		return fmt.Errorf("a reply longer than %d bytes", MaxReply)
	}
	return nil
}

// header checks one header line (CRLF included) and updates the state.
func (p *respParser) header(line []byte) error {
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return errors.New("a line not ended by CRLF")
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		p.element()
	case '$', '=', '!':
		n, err := length(body)
		if err != nil {
			return err
		}
		if n > MaxBulk {
			return fmt.Errorf("a bulk string of %d bytes (at most %d)", n, MaxBulk)
		}
		if n < 0 {
			p.element() // null
			return nil
		}
		p.payload = n + 2
	case '*', '~', '>', '%', '|':
		n, err := length(body)
		if err != nil {
			return err
		}
		if n > MaxElems {
			return fmt.Errorf("an aggregate of %d elements (at most %d)", n, MaxElems)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2 // a map's entries are key, value pairs
		}
		if n <= 0 {
			p.element() // empty or null
			return nil
		}
		if len(p.stack) >= MaxDepth {
			return fmt.Errorf("aggregates nested deeper than %d", MaxDepth)
		}
		p.stack = append(p.stack, n)
	default:
		return fmt.Errorf("unknown reply type %q", line[0])
	}
	return nil
}

// element records one complete element: it closes the aggregates it
// completes, and the reply when none is open.
func (p *respParser) element() {
	for len(p.stack) > 0 {
		top := &p.stack[len(p.stack)-1]
		if *top--; *top > 0 {
			return
		}
		p.stack = p.stack[:len(p.stack)-1]
	}
	p.inReply = 0
}

// length parses a declared length: a decimal integer ≥ -1 (-1: null).
// Streamed lengths (?) and anything else are refused.
func length(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, fmt.Errorf("a malformed length %q", cut(b))
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("a malformed length %q", cut(b))
	}
	return n, nil
}

func cut(b []byte) string {
	if len(b) > 24 {
		return string(b[:24]) + "…"
	}
	return string(b)
}
