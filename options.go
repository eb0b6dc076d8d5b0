package fleetstore

import (
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/internal/memstore"
	"github.com/fleetstore/fleetstore/observe"
)

// Option configures Open.
type Option func(*options)

type options struct {
	logger     *zap.Logger
	timeout    time.Duration
	timeoutSet bool
	fallback   *Fallback        // WithFallback
	localClock memstore.Clock   // the fallback's local store's clock (tests); nil: monotonic
	observer   observe.Observer // WithObserver
}

// DefaultTimeout is the per-call budget when neither WithTimeout nor the
// URL's timeout parameter sets one.
const DefaultTimeout = 100 * time.Millisecond

// DefaultKeyPrefix namespaces keys when the URL has no key_prefix.
const DefaultKeyPrefix = "fleetstore"

// WithLogger sets the logger of the Store and its driver. Default
// zap.NewNop(); nil keeps the default.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithTimeout sets the default per-call budget (CONTRACT T1) and overrides
// the URL's ?timeout=. A call's budget is the earlier of its context's
// deadline and now + d. d must be positive: Open returns ErrInvalid
// otherwise.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout, o.timeoutSet = d, true }
}
