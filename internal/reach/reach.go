// Package reach logs whether a store answers, once per change: one warning
// when calls start failing unanswered, one line when the server answers
// again, never one line per failed call. The network drivers share it.
package reach

import (
	"sync/atomic"

	"go.uber.org/zap"
)

// Log tracks one store's reachability. The zero value is not usable; use
// New.
type Log struct {
	down    atomic.Bool
	log     *zap.Logger
	store   string // "redis", "valkey"
	display string // the URL with its password redacted
}

// New returns a Log for store ("redis") at display, a redacted URL.
func New(log *zap.Logger, store, display string) *Log {
	return &Log{log: log, store: store, display: display}
}

// Down records a call the server did not answer; the first of an outage
// logs a warning with its cause.
func (l *Log) Down(cause error) {
	if l.down.CompareAndSwap(false, true) {
		l.log.Warn("fleetstore: store unreachable; calls fail until it answers again",
			zap.String("store", l.store), zap.String("url", l.display), zap.Error(cause))
	}
}

// Up records an answer; the first after an outage is logged.
func (l *Log) Up() {
	if l.down.Load() && l.down.CompareAndSwap(true, false) {
		l.log.Info("fleetstore: store reachable again", zap.String("store", l.store), zap.String("url", l.display))
	}
}
