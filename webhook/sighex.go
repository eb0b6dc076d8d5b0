package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// lowerHexSig decodes s, a signature of n bytes sent in lower-case hex, as
// the official verifiers of GitHub, Stripe, Slack, Paddle and Linear take
// it (octokit/webhooks-methods, stripe-node, …): they compare the string of
// their own hex digest, so upper-case hex, another length or any other
// byte is false (hex.DecodeString alone would take upper case).
func lowerHexSig(s string, n int) ([]byte, bool) {
	if len(s) != 2*n {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, false
		}
	}
	sig, err := hex.DecodeString(s)
	return sig, err == nil
}

// timedSigs reads a header of sep-separated key=value pairs as Stripe's
// and Paddle's official libraries do: the value of tsKey (the timestamp,
// not parsed) and every value of sigKey that is an HMAC-SHA256 in
// lower-case hex; other keys and other signatures are ignored, nothing is
// trimmed.
func timedSigs(v, sep, tsKey, sigKey string) (ts string, sigs [][]byte) {
	for _, pair := range strings.Split(v, sep) {
		k, val, _ := strings.Cut(pair, "=")
		switch k {
		case tsKey:
			ts = val
		case sigKey:
			if sig, ok := lowerHexSig(val, sha256.Size); ok {
				sigs = append(sigs, sig)
			}
		}
	}
	return ts, sigs
}
