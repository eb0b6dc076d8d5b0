package webhook

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// state is a condition logged once when it starts (a warning) and once
// when it ends (info), never once per delivery.
type state struct{ on atomic.Bool }

func (s *state) set(log *zap.Logger, msg string, fields ...zap.Field) {
	if !s.on.Load() && s.on.CompareAndSwap(false, true) {
		log.Warn(msg, fields...)
	}
}

func (s *state) clear(log *zap.Logger, msg string) {
	if s.on.Load() && s.on.CompareAndSwap(true, false) {
		log.Info(msg)
	}
}

// quiet is how long a senderState waits, after it was last started, before
// a verified delivery may end it.
const quiet = time.Minute

// senderState is a condition an unauthenticated sender can start (a
// forged delivery, a tenant whose Secrets fail): it ends on a delivery that
// verifies, and only once none has started it for quiet, so that a sender
// who keeps starting it between real deliveries gets it logged once, not
// twice per real delivery.
type senderState struct {
	state
	last atomic.Int64 // when it was last started: Unix ns of the handler's clock
}

func (s *senderState) set(log *zap.Logger, now time.Time, msg string, fields ...zap.Field) {
	s.last.Store(now.UnixNano())
	s.state.set(log, msg, fields...)
}

func (s *senderState) clear(log *zap.Logger, now time.Time, msg string) {
	if s.on.Load() && now.UnixNano()-s.last.Load() >= int64(quiet) {
		s.state.clear(log, msg)
	}
}
