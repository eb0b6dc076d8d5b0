package degraded

import (
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// The conflict log is a GCRA bucket over the Store's life: a burst of
// ConflictLogBurst lines, then one every conflictLogEvery at most, so that
// a store that flaps cannot fill the log; every conflict is counted
// (Stats.Conflicts) and handed to OnConflict all the same.
const (
	ConflictLogBurst = 10
	conflictLogEvery = time.Minute
)

// conflictLog logs replayed commits that met another hook's committed
// claim: the outage let one provider event in twice. A line names the
// claim's identity (never a body: the Store has none), cut as errors cut
// it, while its bucket allows; the next line logged says how many were
// not. Only the worker writes it.
type conflictLog struct {
	log    *zap.Logger
	scheme string
	now    func() time.Time

	tat         int64  // the bucket's TAT, µs of now
	notLogged   uint64 // conflicts not logged since the last line
	quietLogged bool   // the line saying they are not was logged: once a Store
}

// add logs, or counts as not logged, the commit c queued at queuedAt that
// met holder's committed claim.
func (l *conflictLog) add(c *driver.Claim, holder string, queuedAt time.Time) {
	const every = int64(conflictLogEvery / time.Microsecond)
	d := gcra.Charge(l.now().UnixMicro(), l.tat, every, ConflictLogBurst*every)
	if !d.Conform {
		if l.notLogged++; !l.quietLogged {
			l.quietLogged = true
			l.log.Warn("fleetstore: further replay conflicts are counted (Stats.Conflicts), "+
				"not logged, beyond one a minute",
				zap.String("scheme", l.scheme), zap.Int("burst", ConflictLogBurst))
		}
		return
	}
	l.tat = d.TAT
	l.log.Warn("fleetstore: replayed commit met another hook's claim; "+
		"the outage let this event in twice",
		zap.String("scheme", l.scheme), zap.String("tenant", cut(c.Tenant)),
		zap.String("source_id", cut(c.SourceID)), zap.String("key", cut(c.Key)),
		zap.String("hook_id", cut(c.HookID)), zap.String("holder", cut(holder)),
		zap.String("node", cut(c.Node)), zap.Time("queued_at", queuedAt),
		zap.Uint64("not_logged", l.notLogged))
	l.notLogged = 0
}

// cut keeps the first 64 characters of s, as ClaimError's message does
// (%.64q), never half of one.
func cut(s string) string {
	n := 0
	for i := range s {
		if n == 64 {
			return s[:i]
		}
		n++
	}
	return s
}
