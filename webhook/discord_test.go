package webhook_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
)

// Discord publishes no signed interaction with its key, and its official
// library's tests (github.com/discord/discord-interactions-js
// src/__tests__/utils/SharedTestUtils.ts) sign with a key pair generated
// at each run. So the vector is derived from a published key pair: RFC
// 8032's Ed25519 "TEST 1" (section 7.1, secret key 9d61b19d…7f60, public
// key below), which signed, for X-Signature-Timestamp 1700000000 (a time
// of ours), that test file's applicationCommandRequestBody and
// pingRequestBody as JSON.stringify writes them. Ed25519 is deterministic:
// anyone with RFC 8032's secret key gets the same signatures (they were
// made with Python's cryptography package, not with this code).
const (
	discordPublicKey  = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	discordTimestamp  = "1700000000"
	discordCommand    = `{"id":"787053080478613556","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":2,"version":1,"data":{"id":"787053080478613554","name":"test"}}`
	discordCommandSig = "4cbcce90ca257785667295862f258f4920233243b91c2694b14b52d9689c2a5c" +
		"8dbb476e87eea64cbe841f6ced59e19beb307e4d38b21fccdb4a825be6aeb908"
	discordPing    = `{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}`
	discordPingSig = "f0bd878adcef1f6d475c9644421905bd02b5de38e0d3ecfc6f58a711962c69cc" +
		"c8dd7c9db312f9bdf08b1e1b8182e27a844da728c5e0dbb5507bf9931c1ed80b"
	// rfc8032Test1Sig is RFC 8032's TEST 1 signature, of the empty message.
	rfc8032Test1Sig = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
	// discordOtherKey is RFC 8032's TEST 2 public key.
	discordOtherKey = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
)

var discordSigned = signed{
	p: webhook.Discord(0),
	header: hdr("X-Signature-Timestamp", discordTimestamp,
		"X-Signature-Ed25519", discordCommandSig),
	body:    discordCommand,
	secret:  discordPublicKey,
	other:   discordOtherKey,
	now:     time.Unix(1700000000, 0).Add(2 * time.Second),
	eventID: "787053080478613556",
}

// TestDiscord: the vector verifies with the public key; tampering,
// another key and malformed headers are refused; the timestamp is held to
// the tolerance; a public key that is not 32 bytes of hex is ErrSecret.
func TestDiscord(t *testing.T) {
	t.Parallel()
	key, _ := hex.DecodeString(discordPublicKey)
	rfcSig, _ := hex.DecodeString(rfc8032Test1Sig)
	if !ed25519.Verify(key, nil, rfcSig) {
		t.Fatal("discordPublicKey is not RFC 8032's TEST 1 public key")
	}
	s := discordSigned
	s.check(t, discordCommandSig)
	ping := s
	ping.header = hdr("X-Signature-Timestamp", discordTimestamp,
		"X-Signature-Ed25519", discordPingSig)
	ping.body, ping.eventID = discordPing, "787053080478613555"
	ping.check(t, discordPingSig)
	s.malformed(t, discordCommandSig, map[string]http.Header{
		"no signature":  clone(s.header, "X-Signature-Ed25519", ""),
		"no timestamp":  clone(s.header, "X-Signature-Timestamp", ""),
		"bad timestamp": clone(s.header, "X-Signature-Timestamp", "soon"),
		"other ts":      clone(s.header, "X-Signature-Timestamp", "1700000001"),
		"short":         clone(s.header, "X-Signature-Ed25519", discordCommandSig[:126]),
		"not hex":       clone(s.header, "X-Signature-Ed25519", strings.Repeat("z", 128)),
		"other's sig":   clone(s.header, "X-Signature-Ed25519", discordPingSig),
		"RFC's empty":   clone(s.header, "X-Signature-Ed25519", rfc8032Test1Sig),
	})
	// discord-interactions-js reads hex of either case (parseInt).
	upper := clone(s.header, "X-Signature-Ed25519", strings.ToUpper(discordCommandSig))
	if err := s.verify(upper, s.body, s.secret); err != nil {
		t.Errorf("upper-case hex: %v", err)
	}
	s.tolerance(t, webhook.Discord, time.Unix(1700000000, 0), webhook.DefaultTolerance)
	for _, bad := range []string{"zz", discordPublicKey[:62], discordPublicKey + "00",
		"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="} {
		err := s.verify(s.header, s.body, bad)
		if !errors.Is(err, webhook.ErrSecret) || errors.Is(err, webhook.ErrSignature) {
			t.Errorf("public key %q: %v, want ErrSecret", bad, err)
		}
	}
	if webhook.Discord(0).Retries() {
		t.Error("Discord does not redeliver an interaction")
	}
	for _, body := range []string{`{"type":1}`, `{"id":787053080478613555}`, `not json`} {
		if _, err := webhook.Discord(0).EventID(nil, []byte(body)); !errors.Is(err, webhook.ErrNoEventID) {
			t.Errorf("EventID of %s: %v, want ErrNoEventID", body, err)
		}
	}
}

// TestDiscordAck: a stored interaction is answered 200 with a deferred
// interaction response of its type (Discord's "Interaction Response
// Object": 5 for a command or a modal submit, 6 for a component, 8 with
// no choices for an autocomplete); a PING is the handshake's; another type
// or no JSON gets the table's text.
func TestDiscordAck(t *testing.T) {
	t.Parallel()
	p := webhook.Discord(0)
	if a, ok := p.(webhook.Accepter); !ok || a.AcceptStatus() != http.StatusOK {
		t.Fatal("Discord is no Accepter of 200")
	}
	acker, ok := p.(webhook.Acker)
	if !ok {
		t.Fatal("Discord is no Acker")
	}
	for body, want := range map[string]string{
		discordCommand:                    `{"type":5}`,
		`{"id":"1","token":"t","type":3}`: `{"type":6}`,
		`{"id":"1","token":"t","type":4}`: `{"type":8,"data":{"choices":[]}}`,
		`{"id":"1","token":"t","type":5}`: `{"type":5}`,
		`{"id":"1","token":"t","type":9}`: "",
		`not json`:                        "",
	} {
		reply, ct := acker.Ack(nil, []byte(body))
		if string(reply) != want || want != "" && ct != "application/json" {
			t.Errorf("Ack of %s: %q %q, want %q as application/json", body, reply, ct, want)
		}
	}
}

// An application command signed with RFC 8032's TEST 1 key (the public
// key is the Secrets' entry), checked by the provider itself, and the
// interaction response the handler answers it with once it is stored.
func ExampleDiscord() {
	p := webhook.Discord(0)
	h := http.Header{
		"X-Signature-Timestamp": {discordTimestamp},
		"X-Signature-Ed25519":   {discordCommandSig},
	}
	received := time.Unix(1700000000, 0).Add(2 * time.Second)
	err := p.Verify(h, []byte(discordCommand), []string{discordPublicKey}, received)
	id, _ := p.EventID(h, []byte(discordCommand))
	fmt.Printf("verified: %v, interaction %s\n", err == nil, id)
	err = p.Verify(h, []byte(discordPing), []string{discordPublicKey}, received)
	fmt.Println(err)
	reply, ct := p.(webhook.Acker).Ack(h, []byte(discordCommand))
	fmt.Printf("once stored: %d %s %s\n", p.(webhook.Accepter).AcceptStatus(), ct, reply)
	// Output:
	// verified: true, interaction 787053080478613556
	// webhook: signature verification failed: discord: X-Signature-Ed25519 matches no public key
	// once stored: 200 application/json {"type":5}
}
