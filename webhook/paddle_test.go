package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
)

// Paddle's published vectors. The main one is the official paddle-go-sdk's
// (github.com/PaddleHQ/paddle-go-sdk example_webhook_verifier_test.go:
// exampleSignature, examplePayload, exampleSecretKey), a price.created
// notification signed at 1710929255. paddle-node-sdk's
// (src/__tests__/notifications/webhooks-validator.node.test.ts, secret
// VALID_SECRET) and paddle-python-sdk's
// (tests/Unit/Notification/test_Verifier.py) add headers with several h1,
// an unknown h2 and three secrets.
const (
	paddleSecret    = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"
	paddleSignature = "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8"
	paddleBody      = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`
	paddleHex       = "6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8"
)

var paddleSigned = signed{
	p:       webhook.Paddle(0),
	header:  hdr("Paddle-Signature", paddleSignature),
	body:    paddleBody,
	secret:  paddleSecret,
	other:   "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_another",
	now:     time.Unix(1710929255, 0).Add(3 * time.Second),
	eventID: "evt_01hsdn97563968dy0szkmgjwh3",
}

// TestPaddle: the Go SDK's vector verifies; tampering, another secret and
// malformed headers are refused; the timestamp is held to 5 seconds by
// default.
func TestPaddle(t *testing.T) {
	t.Parallel()
	s := paddleSigned
	s.check(t, paddleHex)
	s.malformed(t, paddleHex, map[string]http.Header{
		"no signature":   clone(s.header, "Paddle-Signature", ""),
		"no ts":          clone(s.header, "Paddle-Signature", "h1="+paddleHex),
		"bad ts":         clone(s.header, "Paddle-Signature", "ts=soon;h1="+paddleHex),
		"other ts":       clone(s.header, "Paddle-Signature", "ts=1710929256;h1="+paddleHex),
		"no h1":          clone(s.header, "Paddle-Signature", "ts=1710929255;h2="+paddleHex),
		"upper-case hex": clone(s.header, "Paddle-Signature", "ts=1710929255;h1="+strings.ToUpper(paddleHex)),
		"short h1":       clone(s.header, "Paddle-Signature", "ts=1710929255;h1="+paddleHex[:62]),
		"comma":          clone(s.header, "Paddle-Signature", "ts=1710929255,h1="+paddleHex),
		"garbage":        clone(s.header, "Paddle-Signature", ";;=;ts=;h1="),
	})
	// Every h1 is tried, as paddle-python-sdk tries them: the right one
	// first, then another secret's.
	rotating := clone(s.header, "Paddle-Signature", paddleSignature+";h1="+strings.Repeat("ab", 32))
	if err := s.verify(rotating, s.body, s.secret); err != nil {
		t.Errorf("two h1, the first right: %v", err)
	}
	s.tolerance(t, webhook.Paddle, time.Unix(1710929255, 0), 5*time.Second)
	if !webhook.Paddle(0).Retries() {
		t.Error("Paddle retries a notification")
	}
}

// TestPaddleSDKVectors: paddle-node-sdk's and paddle-python-sdk's headers,
// with the SDKs' answers; each was received at its ts.
func TestPaddleSDKVectors(t *testing.T) {
	t.Parallel()
	const pythonHeader = "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"
	pythonSecrets := []string{
		"pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4",
		"pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo",
		"pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh", // the one that signed
	}
	for _, tt := range []struct {
		name, body, header string
		secrets            []string
		ok                 bool
	}{
		{"node: valid", `{"data": ["1", "2"]}`, "ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9", []string{"VALID_SECRET"}, true},
		{"node: multiple hashes, h2", `{"data": "value"}`, "ts=1698796800;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h2=RANDOM_HASH", []string{"VALID_SECRET"}, true},
		{"node: invalid secret", `{"data": ["1", "2"]}`, "ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9", []string{"INVALID_VALID_SECRET"}, false},
		{"node: more space", `{ "data": [ "1", "2" ]}`, "ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9", []string{"VALID_SECRET"}, false},
		{"node: invalid signature", `{"data": ["1", "2"]}`, "ts=1698796800;h1=invalid_signature", []string{"VALID_SECRET"}, false},
		{"python: h1=dummy, three secrets", "hello-world", pythonHeader, pythonSecrets, true},
		{"python: the two that did not sign", "hello-world", pythonHeader, pythonSecrets[:2], false},
	} {
		ts, _ := strconv.ParseInt(strings.TrimPrefix(strings.Split(tt.header, ";")[0], "ts="), 10, 64)
		at := time.Unix(ts, 0)
		err := webhook.Paddle(0).Verify(hdr("Paddle-Signature", tt.header), []byte(tt.body), tt.secrets, at)
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	for _, body := range []string{`{"data": ["1", "2"]}`, `{"event_id": 7}`, `not json`} {
		if _, err := webhook.Paddle(0).EventID(nil, []byte(body)); !errors.Is(err, webhook.ErrNoEventID) {
			t.Errorf("EventID of %s: %v, want ErrNoEventID", body, err)
		}
	}
}

// paddle-go-sdk's example notification, received 3 seconds after it was
// signed (within Paddle's 5 seconds): named by its event_id.
func ExamplePaddle() {
	h, done := exampleHandler(webhook.Paddle(0), paddleSecret, time.Unix(1710929255+3, 0))
	defer done()
	deliver(h, http.Header{"Paddle-Signature": {paddleSignature}}, paddleBody)
	// Output:
	// stored paddle event evt_01hsdn97563968dy0szkmgjwh3 of acme (575 bytes)
	// delivery: 200, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}
