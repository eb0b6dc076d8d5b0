package conformance_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
)

// The teeth of the clauses about what a network driver meets: drivers that
// reach a real address (the suite's fakes) and get it wrong, each with an
// honest control that passes.

// netDriver opens a netConn on the URL's host:port.
type netDriver struct {
	perClaim bool // a batch that reached nothing reports one error per claim
	trusting bool // a reply's declared length is allocated as declared
	panicky  bool // a negative declared length panics the caller
}

func (d netDriver) Open(cfg driver.Config) (driver.Conn, error) {
	return &netConn{d: d, addr: cfg.URL.Host}, nil
}

// netConn sends one line per call and reads one line back: it never
// decides anything, so every call fails, the way a driver fails against a
// refused port or a server speaking nonsense.
type netConn struct {
	d    netDriver
	addr string
}

func (c *netConn) call(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReaderSize(conn, 64<<10).ReadString('\n')
	if err != nil && line == "" {
		return err
	}
	if n, ok := declared(line); ok {
		switch {
		case n > 0 && c.d.trusting:
			buf := make([]byte, min(n, 300<<20))
			buf[len(buf)-1] = 1
		case n < 0 && c.d.panicky:
			_ = make([]byte, n) // makeslice: len out of range
		}
	}
	return driver.ErrorReply(fmt.Errorf("unexpected reply of %d bytes", len(line)))
}

// declared is the length a RESP bulk or aggregate header, or a memcached
// VALUE line, declares.
func declared(line string) (int64, bool) {
	line = strings.TrimRight(line, "\r\n")
	var num string
	switch {
	case strings.HasPrefix(line, "VALUE "):
		f := strings.Fields(line)
		if len(f) < 4 {
			return 0, false
		}
		num = f[3]
	case len(line) > 1 && strings.ContainsRune("$*%", rune(line[0])):
		num = line[1:]
	default:
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return n, err == nil && n != 0
}

func (c *netConn) Hit(ctx context.Context, _ []driver.Charge, _ *driver.Claim) (driver.Result, error) {
	return driver.Result{}, c.call(ctx)
}

func (c *netConn) settle(ctx context.Context, claims []driver.Claim) ([]error, error) {
	err := c.call(ctx)
	if !c.d.perClaim {
		return nil, err
	}
	errs := make([]error, len(claims))
	for i := range errs {
		errs[i] = err // the convention of the old interface
	}
	return errs, nil
}

func (c *netConn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, claims)
}

func (c *netConn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, claims)
}

func (c *netConn) Reset(ctx context.Context, _ string) error { return c.call(ctx) }
func (c *netConn) Ping(ctx context.Context) error            { return c.call(ctx) }
func (*netConn) Close() error                                { return nil }

// TestNetTeeth: a whole-call failure reported as one error per claim fails
// T2 (refused) and T1 (silent); a driver that allocates what a server declares, or panics on a
// negative length, fails V4. The honest drivers pass.
func TestNetTeeth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      netDriver
		clause string
		want   conformance.Status
	}{
		{"whole-call-failure-per-claim", netDriver{perClaim: true}, "T2", conformance.Fail},
		{"whole-call-timeout-per-claim", netDriver{perClaim: true}, "T1", conformance.Fail},
		{"honest-silent", netDriver{}, "T1", conformance.Pass},
		{"honest-refused", netDriver{}, "T2", conformance.Pass},
		{"trusts-declared-lengths", netDriver{trusting: true}, "V4", conformance.Fail},
		{"panics-on-negative-length", netDriver{panicky: true}, "V4", conformance.Fail},
		{"honest-garbage", netDriver{}, "V4", conformance.Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// V4 counts what the whole process allocates: its checks run
			// one at a time, before the others run side by side.
			if tc.clause != "V4" {
				t.Parallel()
			}
			r := <-startCheck(conformance.Config{Driver: tc.d, URL: "net://127.0.0.1:9"}, tc.clause)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.reports) != 1 || r.reports[0].Status != tc.want {
				t.Fatalf("%s: clause %s: %+v, want %s", tc.name, tc.clause, r.reports, tc.want)
			}
			t.Logf("%s: %s %s: %s", tc.name, tc.clause, r.reports[0].Status, strings.Join(r.reports[0].Messages, "; "))
		})
	}
}
