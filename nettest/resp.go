package nettest

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
)

// NewRESP starts a server that speaks just enough RESP2 for a Redis client
// to connect (HELLO unknown, cluster support disabled, PING, CLIENT,
// SELECT and AUTH answered) and answers every other command — a script
// call, DEL, CONFIG — with reply: a server whose handshake is fine and
// whose replies are not (V4).
func NewRESP(t TB, reply string) *Server {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return NewServer(t, func(c net.Conn) { serveRESP(c, reply) })
}

func serveRESP(c net.Conn, reply string) {
	r := bufio.NewReader(c)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		var out string
		switch strings.ToUpper(cmd[0]) {
		case "HELLO":
			out = "-ERR unknown command 'HELLO'\r\n"
		case "CLUSTER":
			out = "-ERR This instance has cluster support disabled\r\n"
		case "PING":
			out = "+PONG\r\n"
		case "CLIENT", "SELECT", "AUTH":
			out = "+OK\r\n"
		default:
			out = reply
		}
		if _, err := c.Write([]byte(out)); err != nil {
			return
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, errors.New("bad command")
	}
	out := make([]string, n)
	for i := range out {
		if _, err := r.ReadString('\n'); err != nil { // $len
			return nil, err
		}
		s, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		// Arguments here (scripts, keys) hold no CRLF but may be long:
		// read until the value's own CRLF.
		for !strings.HasSuffix(s, "\r\n") {
			more, err := r.ReadString('\n')
			if err != nil {
				return nil, err
			}
			s += more
		}
		out[i] = strings.TrimSuffix(s, "\r\n")
	}
	return out, nil
}
