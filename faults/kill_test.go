package faults

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

// TestKillRestart kills the server with SIGKILL while 4 callers hit it
// (each at most once every 2ms), keeps it down for 500ms and starts it
// again on the same port. The same Store, never reopened:
//
//   - every call, failed or not, returns within budget + 10ms + schedSlack
//     (or twice the probe's worst stall, when larger), and every failure
//     is ErrTimeout or ErrUnavailable (no panic: a panic in any goroutine
//     would end the test binary);
//   - the calls made while the server is down fail (the kill took);
//   - a call succeeds within 1s after the server answers again, and no
//     call started later than that is ErrUnavailable (the Store reaches
//     the server again; an ErrTimeout there would be the machine's
//     scheduling, not the restart).
//
// The Redis driver's recovery is go-redis's: after pool_size failed dials
// its pool stops dialing and probes the server once a second
// (internal/pool tryDial), so calls succeed again at the first probe after
// the restart: here about 1s - down after it, up to 1s for other outages.
func TestKillRestart(t *testing.T) {
	const (
		budget   = 100 * time.Millisecond
		down     = 500 * time.Millisecond
		recovery = time.Second
	)
	forEach(t, func(t *testing.T, tg target) {
		srv := tg.start(t)
		s := openStore(t, tg, srv.Addr(), budget, "")
		waitReady(t, s)

		pr := startProbe()
		stop := runLoad(s, 4, 2*time.Millisecond)
		time.Sleep(300 * time.Millisecond)

		if err := srv.Kill(); err != nil {
			stop()
			pr.slack(schedSlack)
			t.Fatalf("kill: %v", err)
		}
		killed := time.Now()
		time.Sleep(down)
		restartAt := time.Now()
		if err := srv.Restart(); err != nil {
			stop()
			pr.slack(schedSlack)
			t.Fatalf("restart: %v", err)
		}
		upAt := time.Now() // the server answers
		time.Sleep(recovery + time.Second)
		recs := stop()
		slack := pr.slack(schedSlack)
		endAt := time.Now()

		sum := checkCalls(t, recs, budget, slack, false)

		// The calls made while the server was down: started after the kill
		// and over before the restart began (a call that waited for its
		// turn may reach a server that is already back).
		var downCalls []record
		for _, r := range within(recs, killed, restartAt) {
			if r.end().Before(restartAt) {
				downCalls = append(downCalls, r)
			}
		}
		if len(downCalls) == 0 || failed(downCalls) != len(downCalls) {
			t.Errorf("%d of %d calls made while the server was down failed; want all, and some", failed(downCalls), len(downCalls))
		}
		// The first success among calls started after the restart began;
		// negative when the server answered while Restart still probed it.
		first, ok := firstOK(recs, restartAt)
		var rec time.Duration
		if !ok {
			t.Errorf("no call succeeded after the restart")
		} else if rec = first.Sub(upAt); rec > recovery {
			t.Errorf("first success %v after the server answered again; want within %v", rec, recovery)
		}
		late := within(recs, upAt.Add(recovery), endAt)
		unreachable, lateFailed := 0, failed(late)
		for _, r := range late {
			if errors.Is(r.err, fleetstore.ErrUnavailable) {
				if unreachable++; unreachable <= 5 {
					t.Errorf("%s at +%v after the restart: %v", r.op, r.start.Sub(upAt).Round(time.Millisecond), r.err)
				}
			}
		}
		if unreachable > 0 || len(late)-lateFailed == 0 {
			t.Errorf("%d of %d calls started more than %v after the restart were ErrUnavailable, %d succeeded; want none, and some",
				unreachable, len(late), recovery, len(late)-lateFailed)
		}
		t.Logf("FIGURE kill driver=%s budget=%v calls=%d failed=%d (timeout %d, unavailable %d) worst=%v slack=%v probe=%v down_calls=%d restart_took=%v recovery=%v late_failed=%d",
			tg.name, budget, len(recs), failed(recs), sum.timeouts, sum.unavailable, sum.worst.Round(100*time.Microsecond), slack.Round(time.Millisecond), pr.worst.Round(time.Millisecond),
			len(downCalls), upAt.Sub(restartAt).Round(time.Millisecond), rec.Round(100*time.Microsecond), lateFailed)
	})
}
