package valkey

import (
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/ownclient"
	"github.com/fleetstore/fleetstore/internal/rediscore"
)

// FromOption returns a driver that opens Stores on a client the
// application configures: opt is the application's valkey.ClientOption
// (its addresses, credentials — AuthCredentialsFn included —, TLSConfig,
// Sentinel), and build makes the client from it, as valkey-go's own
// valkeylock takes a ClientOption and a ClientBuilder: a function that
// calls valkeyotel.NewClient for traces and metrics, or wraps
// valkey.NewClient with valkeyhook.WithHook. A nil build is valkey.NewClient;
// a build that returns a nil client and no error fails the call as a
// failed build does (ErrUnavailable). Hand the driver
// to fleetstore.OpenDriver with a URL that holds only the scheme (valkey
// or valkeys; any other is ErrInvalid naming "url: scheme") and the
// common parameters:
//
//	opt := valkey.ClientOption{
//		InitAddress:  []string{"cache:6379"},
//		DisableRetry: true, // CONTRACT T2
//		// ≤ the Store's timeout: T1, T4
//		Dialer:           net.Dialer{Timeout: 50 * time.Millisecond},
//		ConnWriteTimeout: 50 * time.Millisecond, // T4
//		AlwaysPipelining: true,                  // T5
//	}
//	traced := func(o valkey.ClientOption) (valkey.Client, error) { return valkeyotel.NewClient(o) }
//	store, err := fleetstore.OpenDriver(valkey.FromOption(opt, traced), "valkey://?timeout=50ms")
//
// The driver takes an option, not a built valkey.Client: a valkey.Client
// shows none of its settings, so only the option it is built from can be
// checked, and valkey.NewClient dials, which Open must not (T3). Open
// refuses, with ErrInvalid naming the setting ("client: DisableRetry"),
// an option that would break the contract:
//
//   - DisableRetry false: a read-only command (PING) would be retried on a
//     refused server until the budget ran out, a timeout instead of
//     ErrUnavailable (T2). valkey-go never retries a script.
//   - Dialer.Timeout (and Sentinel.Dialer.Timeout with a Sentinel) of 0
//     (valkey-go's 5s), negative, or longer than the Store's timeout: the
//     dial and handshake would outlive the call (T1, T4).
//   - ConnWriteTimeout of 0 (valkey-go's 10s), negative, or longer than
//     the Store's timeout: a connection that stops answering, and the cluster's
//     slot-map refresh, which runs without a context, would outlive the
//     budget (T4).
//   - AlwaysPipelining false or DisableAutoPipelining true: a connection
//     the server closed (a restart) would only be noticed by the next
//     call written to it, which then fails (T5: a restart between two
//     calls is invisible).
//   - ReplicaOnly or SendToReplicas: the scripts write, on masters.
//
// Everything else stays as opt says (client-side caching: valkey-go turns
// it on unless DisableCache, and sends CLIENT TRACKING on every
// connection; the driver never uses it). The client is built at the first
// call, as the driver's own is (see Lazy start), with every connection's
// replies bounded as the driver's own are (V4), through opt.DialCtxFn
// when set. Each Store builds its own client and Store.Close closes it
// (T4 as for Open).
func FromOption(
	opt valkey.ClientOption, build func(valkey.ClientOption) (valkey.Client, error),
) driver.Driver {
	if build == nil {
		build = valkey.NewClient
	}
	return optionDriver{opt: opt, build: build}
}

// optionDriver is the driver of FromOption.
type optionDriver struct {
	opt   valkey.ClientOption
	build func(valkey.ClientOption) (valkey.Client, error)
}

var (
	_ driver.Driver            = optionDriver{}
	_ driver.ExpiryGranularity = optionDriver{}
)

// ExpiryGranularity implements driver.ExpiryGranularity, as Driver's.
func (optionDriver) ExpiryGranularity() time.Duration { return Driver{}.ExpiryGranularity() }

// Open implements driver.Driver: it checks the URL and the option, and
// dials nothing (the client is built at the first call).
func (d optionDriver) Open(cfg driver.Config) (driver.Conn, error) {
	if err := ownclient.CheckURL(cfg.URL, "valkey", "valkeys"); err != nil {
		return nil, err
	}
	if err := checkOption(d.opt, cfg.Timeout); err != nil {
		return nil, err
	}
	l := newLazyClient(d.opt)
	l.newClient = d.build
	return rediscore.New(&client{lazy: l}, cfg, cfg.URL.Redacted()), nil
}

// closedFails is why valkey-go's auto-pipelining must stay on.
const closedFails = "a connection the server closed would fail the next call " +
	"written to it (CONTRACT T5)"

// checkOption refuses the settings of opt that would break the contract
// for a Store of the given budget (see FromOption).
func checkOption(opt valkey.ClientOption, budget time.Duration) error {
	timeout := func(field string, d, zero time.Duration) error {
		switch {
		case d == 0:
			return ownclient.Refuse(field, fmt.Sprintf("is 0, valkey-go's %v, longer than "+
				"the Store's timeout (%v) (CONTRACT T1, T4); set it at most the timeout",
				zero, budget))
		case d < 0:
			return ownclient.Refuse(field, fmt.Sprintf("is %v: negative, no usable deadline "+
				"(CONTRACT T1, T4); set it above 0 and at most the Store's timeout (%v)",
				d, budget))
		}
		return ownclient.Timeout(field, d, budget)
	}
	switch {
	case !opt.DisableRetry:
		return ownclient.Refuse("DisableRetry", "is false: a PING to a refused server "+
			"would be retried until the budget ran out (CONTRACT T2); set it true")
	case !opt.AlwaysPipelining:
		return ownclient.Refuse("AlwaysPipelining", "is false: "+closedFails+"; set it true")
	case opt.DisableAutoPipelining:
		return ownclient.Refuse("DisableAutoPipelining",
			"is true: "+closedFails+"; leave it false")
	case opt.ReplicaOnly || opt.SendToReplicas != nil:
		return ownclient.Refuse("ReplicaOnly",
			"or SendToReplicas is set: the scripts write, on masters; leave them unset")
	}
	if err := timeout("Dialer.Timeout", opt.Dialer.Timeout, 5*time.Second); err != nil {
		return err
	}
	if opt.Sentinel.MasterSet != "" {
		err := timeout("Sentinel.Dialer.Timeout", opt.Sentinel.Dialer.Timeout, 5*time.Second)
		if err != nil {
			return err
		}
	}
	return timeout("ConnWriteTimeout", opt.ConnWriteTimeout, 10*time.Second)
}
