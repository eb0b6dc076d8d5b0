package webhook

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Discord returns the provider of Discord's interactions endpoint
// (discord.com/developers/docs, "Interactions", "Receiving and
// Responding"): X-Signature-Ed25519 is the hex Ed25519 signature of
// X-Signature-Timestamp (Unix seconds) followed by the body, made with the
// application's private key. Its secrets are not shared secrets but the
// application's public keys, as the developer portal shows them (64 hex
// digits); one that is not is ErrSecret. A timestamp further than
// tolerance from now is refused, a tolerance of 0 or less meaning
// DefaultTolerance: the timestamp is signed, though Discord's own
// verifier (discord-interactions-js, verifyKey) checks no tolerance.
//
// The event id is the interaction's id, the body's "id" (a snowflake).
//
// Discord does not redeliver an interaction: Retries is false. A PING
// (type 1), which Discord sends when the endpoint URL is saved and without
// whose {"type":1} it refuses the URL, is answered so (Handshaker),
// charging and claiming nothing. Any other interaction, once stored, is
// answered 200 with a deferred interaction response (Accepter, Acker:
// {"type":5} for a command): the application answers the user later with
// the interaction's token (valid 15 minutes), from the stored hook; one
// over the tenant's limit is stored Deferred and answered so too, so
// serve it within the token's life. Discord fails an interaction not
// answered within 3 seconds: give the handler a Config.SinkTimeout +
// SettleTimeout well below that (the defaults are 10s and 2s). An
// interaction not stored (the Sink failed, the store is out) gets the
// table's answer, and the user sees it fail. An autocomplete cannot be
// deferred: it is answered with no choices; serve autocompletes in front
// of the handler.
func Discord(tolerance time.Duration) Provider { return discord{tolerance: orDefault(tolerance)} }

type discord struct{ tolerance time.Duration }

func (discord) Name() string  { return "discord" }
func (discord) Retries() bool { return false }

func (p discord) Verify(h http.Header, body []byte, publicKeys []string, now time.Time) error {
	ts, v := h.Get("X-Signature-Timestamp"), h.Get("X-Signature-Ed25519")
	if ts == "" || v == "" {
		return sigErr("discord", "no X-Signature-Timestamp or X-Signature-Ed25519")
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sigErr("discord", "X-Signature-Timestamp is not Unix seconds")
	}
	sig, err := hex.DecodeString(v)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return sigErr("discord", "X-Signature-Ed25519 is not 128 hex digits")
	}
	if !within(t, now, p.tolerance) {
		return sigErr("discord", "timestamp outside the tolerance of "+p.tolerance.String())
	}
	if err := checkSecrets("discord", publicKeys); err != nil {
		return err
	}
	keys := make([]ed25519.PublicKey, len(publicKeys))
	for i, s := range publicKeys {
		k, err := hex.DecodeString(s)
		if err != nil || len(k) != ed25519.PublicKeySize {
			return &secretError{provider: "discord", why: "a public key is not 64 hex digits"}
		}
		keys[i] = k
	}
	signed := make([]byte, 0, len(ts)+len(body))
	signed = append(append(signed, ts...), body...)
	for _, k := range keys {
		if ed25519.Verify(k, signed, sig) {
			return nil
		}
	}
	return sigErr("discord", "X-Signature-Ed25519 matches no public key")
}

func (discord) EventID(_ http.Header, body []byte) (string, error) {
	var interaction struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &interaction); err != nil {
		return "", noEventID("discord", "the body is not a JSON interaction")
	}
	if interaction.ID == "" {
		return "", noEventID("discord", "the interaction has no id")
	}
	return interaction.ID, nil
}
