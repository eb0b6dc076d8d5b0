package faults

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

// TestPause stops the server from answering for twice the budget (CLIENT
// PAUSE ALL from a plain go-redis client for Redis and Valkey, SIGSTOP
// then SIGCONT for memcached) while 4 callers hit it, each at most once
// every 2ms. The connections stay open; nothing is refused:
//
//   - every call returns within budget + 10ms + schedSlack (or twice the
//     probe's worst stall, when larger), and every failure is ErrTimeout
//     (T1: the server holds the call, the budget runs out);
//   - some calls time out (the pause took);
//   - a call succeeds within 1s after the pause ends.
func TestPause(t *testing.T) {
	const (
		budget = 100 * time.Millisecond
		pause  = 2 * budget
	)
	forEach(t, func(t *testing.T, tg target) {
		srv := tg.start(t)
		s := openStore(t, tg, srv.Addr(), budget, "")
		waitReady(t, s)

		pr := startProbe()
		stop := runLoad(s, 4, 2*time.Millisecond)
		time.Sleep(200 * time.Millisecond)
		pausedAt := time.Now()
		if err := srv.Pause(pause); err != nil {
			stop()
			pr.slack(schedSlack)
			t.Fatalf("pause: %v", err)
		}
		resumeAt := pausedAt.Add(pause)
		time.Sleep(pause + time.Second)
		recs := stop()
		slack := pr.slack(schedSlack)

		sum := checkCalls(t, recs, budget, slack, true)
		paused := within(recs, pausedAt, resumeAt)
		var worstPaused time.Duration
		timedOut := 0
		for _, r := range paused {
			worstPaused = max(worstPaused, r.took)
			if errors.Is(r.err, fleetstore.ErrTimeout) {
				timedOut++
			}
		}
		if timedOut == 0 {
			t.Errorf("none of the %d calls made during the pause timed out: the pause did not take", len(paused))
		}
		first, ok := firstOK(recs, resumeAt)
		var rec time.Duration
		if !ok {
			t.Errorf("no call succeeded after the pause")
		} else if rec = max(first.Sub(resumeAt), 0); rec > time.Second {
			t.Errorf("first success %v after the pause ended; want within 1s", rec)
		}
		t.Logf("FIGURE pause driver=%s budget=%v pause=%v calls=%d failed=%d (timeout %d, unavailable %d) worst=%v slack=%v probe=%v paused_calls=%d paused_timeouts=%d worst_paused=%v recovery=%v",
			tg.name, budget, pause, len(recs), failed(recs), sum.timeouts, sum.unavailable, sum.worst.Round(100*time.Microsecond), slack.Round(time.Millisecond), pr.worst.Round(time.Millisecond),
			len(paused), timedOut, worstPaused.Round(100*time.Microsecond), rec.Round(100*time.Microsecond))
	})
}
