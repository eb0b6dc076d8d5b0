// Package urlparam names the URL parameters the Store reads and removes
// from a store URL before the driver's Open: timeout, key_prefix and the
// degraded mode's fallback_* (CONTRACT §8). The root package parses them;
// driver.CheckParams lists them among the accepted ones in its error.
package urlparam

// The Store's URL parameters.
const (
	Timeout   = "timeout"
	KeyPrefix = "key_prefix"

	FallbackNodes     = "fallback_nodes"
	FallbackShare     = "fallback_share"
	FallbackOutbox    = "fallback_outbox"
	FallbackClaims    = "fallback_claims"
	FallbackRecent    = "fallback_recent"
	FallbackOutboxDir = "fallback_outbox_dir"
)

// Fallback lists the degraded mode's parameters, in the order they are
// read and listed.
var Fallback = []string{FallbackNodes, FallbackShare, FallbackOutbox, FallbackClaims,
	FallbackRecent, FallbackOutboxDir}

// Store lists every parameter the Store reads, the common ones first.
var Store = append([]string{Timeout, KeyPrefix}, Fallback...)
