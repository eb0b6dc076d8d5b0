package redis_test

import (
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/drivers/redis"
)

// A Store on the application's own go-redis client: the settings the
// contract needs, the driver's connection defences through Dialer, and
// the client closed by the application after the Store.
func ExampleFromClient() {
	opt := &goredis.Options{
		Addr:                  "cache:6379",
		ContextTimeoutEnabled: true,                  // T1
		MaxRetries:            -1,                    // T5
		DialerRetries:         1,                     // T2
		DialTimeout:           50 * time.Millisecond, // ≤ timeout: T1, T4
	}
	opt.Dialer = redis.Dialer(opt)
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	// Hooks (redisotel.InstrumentTracing(rdb)) go on rdb as usual.

	store, err := fleetstore.OpenDriver(redis.FromClient(rdb), "redis://?timeout=50ms&key_prefix=edge")
	if err != nil {
		log.Fatal(err) // e.g. "client: MaxRetries: is 3 …"
	}
	defer store.Close()
}
