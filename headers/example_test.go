package headers_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/headers"
)

// A tenant's burst, as its sender sees it: the RateLimit fields count
// down, t says when one more hook will fit, and the hook over the burst is
// told to come back then.
func ExampleWrite() {
	store, err := fleetstore.Open("memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	// Built once, at start-up: 1 hook an hour, a burst of 2.
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 2))
	limits := []fleetstore.Limit{hooks}

	for range 3 {
		res, _ := store.Hit(context.Background(), []fleetstore.Charge{hooks.Charge("acme", 1)}, nil)
		w := httptest.NewRecorder()
		headers.Write(w.Header(), &res, limits, headers.Options{})
		fmt.Printf("%s: RateLimit: %s; Retry-After: %q\n", res.Outcome, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// ok: RateLimit: "hooks";r=1;t=3600; Retry-After: ""
	// ok: RateLimit: "hooks";r=0;t=3600; Retry-After: ""
	// rate_limited: RateLimit: "hooks";r=0;t=3600; Retry-After: "3600"
}
