package redis

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// GoRedisLogger is the logger go-redis's process-wide goredis.SetLogger
// takes (its internal.Logging: one Printf per line go-redis logs).
type GoRedisLogger interface {
	Printf(ctx context.Context, format string, v ...any)
}

// ZapLogger returns a go-redis logger that writes each line go-redis logs
// to l instead of stderr: a Warn entry with the constant message
// "go-redis" and the line, formatted, in the field "line". A nil l is
// zap's no-op logger (the lines are dropped).
//
// The driver never installs it: go-redis v9 has one logger per process
// and none per client, so a library that called goredis.SetLogger would
// undo the application's choice (or another library's). The application
// installs it, once, at start:
//
//	goredis.SetLogger(redis.ZapLogger(logger))
//
// Without it (or a logger of the application's own), what go-redis still
// logs for the driver's clients goes to stderr: a Sentinel-managed
// master's discovery ("sentinel: GetMasterAddrByName … failed", "sentinel:
// selected addr", "sentinel: new master") and a Sentinel's pool dial
// failures. Failed dials to a server are never logged for the driver's
// own clients (see the package doc). The lines are go-redis's: one per
// event it logs, not one per state change as the Store's own.
func ZapLogger(l *zap.Logger) GoRedisLogger {
	if l == nil {
		l = zap.NewNop()
	}
	return zapGoRedis{l: l.WithOptions(zap.AddCallerSkip(1))}
}

// zapGoRedis is ZapLogger's logger.
type zapGoRedis struct{ l *zap.Logger }

func (z zapGoRedis) Printf(_ context.Context, format string, v ...any) {
	if ce := z.l.Check(zap.WarnLevel, "go-redis"); ce != nil {
		ce.Write(zap.String("line", fmt.Sprintf(format, v...)))
	}
}
