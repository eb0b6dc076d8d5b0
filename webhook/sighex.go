package webhook

import "encoding/hex"

// lowerHexSig decodes s, a signature of n bytes sent in lower-case hex, as
// the official verifiers of Slack, Paddle and Linear take it: they compare
// the string of their own hex digest, so upper-case hex, another length or
// any other byte is false.
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
