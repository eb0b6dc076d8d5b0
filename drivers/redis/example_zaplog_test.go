package redis_test

import (
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/drivers/redis"
)

// The application routes go-redis's process-wide logger to its zap
// logger, once, at start: a Sentinel's discovery lines then reach zap
// instead of stderr. The driver never sets it itself.
func ExampleZapLogger() {
	logger := zap.NewExample()
	goredis.SetLogger(redis.ZapLogger(logger))

	store, err := fleetstore.Open("redis://10.0.0.1:26379/0?master_name=mymaster&timeout=50ms", fleetstore.WithLogger(logger))
	if err != nil {
		logger.Fatal("open", zap.Error(err))
	}
	defer store.Close()
}
