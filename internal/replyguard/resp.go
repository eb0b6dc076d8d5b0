package replyguard

import (
	"errors"
	"fmt"
	"strconv"
)

// respParser reads RESP2 and RESP3 replies: it tracks the aggregates open
// in the current reply.
type respParser struct {
	stack []open // the aggregates open in the current reply
}

// open is an aggregate being read: how many elements are still to come,
// and whether it is an attribute, which annotates the element after it
// and is not itself an element of the aggregate around it.
type open struct {
	left int64
	attr bool
}

// header implements protocol.
func (p *respParser) header(line []byte) (int64, bool, error) {
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return 0, false, errors.New("a line not ended by CRLF")
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return 0, p.element(), nil
	case '$', '=', '!':
		n, err := length(body)
		if err != nil {
			return 0, false, err
		}
		if n > MaxBulk {
			return 0, false, fmt.Errorf("a bulk string of %d bytes (at most %d)", n, MaxBulk)
		}
		if n < 0 {
			return 0, p.element(), nil // null
		}
		return n + 2, false, nil
	case '*', '~', '>', '%', '|':
		n, err := length(body)
		if err != nil {
			return 0, false, err
		}
		if n > MaxElems {
			return 0, false, fmt.Errorf("an aggregate of %d elements (at most %d)", n, MaxElems)
		}
		attr := line[0] == '|'
		if line[0] == '%' || attr {
			n *= 2 // a map's entries are key, value pairs
		}
		if n <= 0 {
			if attr {
				return 0, false, nil // an empty attribute: no element
			}
			return 0, p.element(), nil // empty or null
		}
		if len(p.stack) >= MaxDepth {
			return 0, false, fmt.Errorf("aggregates nested deeper than %d", MaxDepth)
		}
		p.stack = append(p.stack, open{left: n, attr: attr})
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("unknown reply type %q", line[0])
}

// payloadEnd implements protocol: a bulk string is one element.
func (p *respParser) payloadEnd() bool { return p.element() }

// element records one complete element: it closes the aggregates it
// completes, and reports whether that ends the reply. A completed
// attribute is no element of its parent: the element it annotates
// follows.
func (p *respParser) element() bool {
	for len(p.stack) > 0 {
		top := &p.stack[len(p.stack)-1]
		if top.left--; top.left > 0 {
			return false
		}
		attr := top.attr
		p.stack = p.stack[:len(p.stack)-1]
		if attr {
			return false
		}
	}
	return true
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
