package valkey_test

import (
	"log"
	"net"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore"
	fsvalkey "github.com/fleetstore/fleetstore/drivers/valkey"
)

// A Store on a client built from the application's own option and
// builder (here valkey.NewClient; valkeyotel.NewClient for traces).
func ExampleFromOption() {
	opt := valkey.ClientOption{
		InitAddress:      []string{"cache:6379"},
		DisableRetry:     true,                                       // T2
		Dialer:           net.Dialer{Timeout: 50 * time.Millisecond}, // ≤ timeout: T1, T4
		ConnWriteTimeout: 50 * time.Millisecond,                      // T4
		AlwaysPipelining: true,                                       // T5
	}
	build := func(o valkey.ClientOption) (valkey.Client, error) { return valkey.NewClient(o) }
	store, err := fleetstore.OpenDriver(fsvalkey.FromOption(opt, build), "valkey://?timeout=50ms")
	if err != nil {
		log.Fatal(err) // e.g. "client: DisableRetry: is false …"
	}
	defer store.Close() // closes the client it built
}
