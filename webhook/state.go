package webhook

import (
	"sync/atomic"

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
