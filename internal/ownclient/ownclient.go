// Package ownclient holds what the Redis and Valkey drivers share for a
// Store on a client the user built, through redis.FromClient or
// valkey.FromOption. CheckURL checks the URL such a Store is opened with.
// Refuse and Timeout build the ErrInvalid that refuses a client setting
// that would break the contract (CONTRACT §1.1).
package ownclient

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// CheckURL checks the URL of a Store on the user's own client, e.g.
// "redis://?timeout=50ms": the client holds the servers, credentials and
// TLS, so the URL holds only the scheme and the common parameters (the
// Store has read and removed them, fallback_* too).
// The scheme must be one of schemes, the driver's own: a Store on a
// Redis client opened as memory:// would report itself as memory
// (StoreInfo.Scheme, an observer's db.system.name).
// Errors wrap ErrInvalid and never quote the URL.
func CheckURL(u *url.URL, schemes ...string) error {
	if !slices.Contains(schemes, u.Scheme) {
		return driver.Invalid("url: scheme", fmt.Sprintf("%q is not this client's: want %s",
			u.Scheme, strings.Join(schemes, ", ")))
	}
	if u.User != nil || u.Host != "" || u.Opaque != "" || (u.Path != "" && u.Path != "/") {
		return driver.Invalid("url", "a Store on your own client takes its servers from "+
			"the client: give only the scheme and common parameters, e.g. "+
			u.Scheme+"://?timeout=50ms")
	}
	if err := driver.CheckParams(u.Query()); err != nil {
		return fmt.Errorf("%w (a Store on your own client takes the client's settings "+
			"from the client)", err)
	}
	return nil
}

// Refuse is the error for a client setting that would break the contract:
// field is the setting as the client library names it ("MaxRetries"),
// why says what it is and what to set instead.
func Refuse(field, why string) error {
	return driver.Invalid("client: "+field, why)
}

// Timeout refuses a client timeout d (field) longer than the Store's
// budget: that timer runs on the client's own context, so it would
// outlive the call (CONTRACT T1, T4).
func Timeout(field string, d, budget time.Duration) error {
	if d <= budget {
		return nil
	}
	return Refuse(field, fmt.Sprintf("is %v, longer than the Store's timeout (%v): it runs "+
		"on the client's own clock, past the call's budget (CONTRACT T1, T4); "+
		"set it at most the timeout", d, budget))
}
