// Package nettest is fleetstore's one set of network fakes: the servers
// that misbehave on purpose, which the conformance suite, the fault suite
// and the drivers' own tests point a Store at. Like net/http/httptest,
// each constructor listens on a loopback port and returns the fake; the
// fake is closed, with every connection it accepted, when the test ends.
//
// Each fake serves a clause of CONTRACT.md:
//
//   - [NewSilent] accepts TCP connections and never writes a byte: every
//     call must end with ErrTimeout within its budget (T1), and nothing
//     may outlive Close (T4). It holds the connections without a
//     goroutine each, so a test that counts goroutines counts only the
//     driver's; [Server.StillOpen] tells whether the driver closed its
//     sockets.
//   - [NewHangUp] accepts and closes each connection at once: a test
//     counts the dials ([Server.Accepted]) to see that Open makes none
//     (T3), or makes a connection attempt fail fast.
//   - [RefusedAddr] is an address where nothing listens, so a dial is
//     refused: ErrUnavailable within the budget (T2). Its port was free a
//     moment ago, so a test can make the server appear there later (T3).
//   - [BlackHole] is an address whose SYNs are dropped, so a dial hangs:
//     the dial must end with the budget (T1, T4).
//   - [NewProxy] forwards to a real server and, while
//     [Proxy.DropReplies] is on, throws the replies away after the server
//     acted on the requests: a call whose reply was lost must not be sent
//     again (T5). A [ReplyFilter] loses or holds back chosen replies.
//   - [NewGarbage] answers every read with the same bytes: a server that
//     speaks nonsense gets an error value, never a panic, within the
//     budget (V4). [NewServer] runs a handler of the test's own on each
//     connection, for nonsense that has to get past a handshake first.
//
// A test of a network driver:
//
//	func TestSilent(t *testing.T) {
//		silent := nettest.NewSilent(t)
//		st, _ := fleetstore.OpenDriver(mystore.Driver{}, "mystore://"+silent.Addr(),
//			fleetstore.WithTimeout(100*time.Millisecond))
//		err := st.Ping(context.Background()) // ErrTimeout after 100ms
//		st.Close()
//		if n := silent.StillOpen(time.Second); n > 0 { ... }
//	}
//
// The constructors take a [TB], which *testing.T, *testing.B and the
// conformance suite's T all are, so the suite uses them outside go test
// too.
package nettest

// TB is what a fake needs of the test that made it: a way to fail it, to
// skip it (BlackHole, where the system cannot make one) and to close the
// fake when it ends. testing.TB has these; so does the conformance suite's own clause type. When t
// also has a Helper method (testing.TB), the constructors call it.
type TB interface {
	Cleanup(f func())
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}
