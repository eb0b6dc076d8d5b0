package webhooktest

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// StandardWebhooks signs d as the Standard Webhooks specification says
// (github.com/standard-webhooks/standard-webhooks,
// spec/standard-webhooks.md). webhook-id is d.ID, else msg_ and random
// hex; webhook-timestamp is d.Time in Unix seconds. webhook-signature is
// "v1,BASE64": the padded base64 HMAC-SHA256 of "ID.TIMESTAMP.BODY".
// Its key is what the secret "whsec_BASE64" decodes to, padded or not,
// as the reference libraries read it. A secret that does not decode is an
// error.
func StandardWebhooks(d Delivery) (*http.Request, error) { return standard(d, "webhook-") }

// Svix signs d as StandardWebhooks does, under Svix's own header names:
// svix-id, svix-timestamp, svix-signature (docs.svix.com, "Verifying
// Webhooks Manually").
func Svix(d Delivery) (*http.Request, error) { return standard(d, "svix-") }

func standard(d Delivery, prefix string) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	key, err := whsec(d.Secret)
	if err != nil {
		return nil, err
	}
	id, ts := d.id("msg_"), d.unix()
	sig := macKey(key, []byte(id+"."+ts+"."), d.Body)
	return d.request(prefix+"id", id, prefix+"timestamp", ts,
		prefix+"signature", "v1,"+base64.StdEncoding.EncodeToString(sig))
}

// whsec is the key of a Standard Webhooks secret: the base64 after
// whsec_, padded or not.
func whsec(secret string) ([]byte, error) {
	b64 := strings.TrimPrefix(secret, "whsec_")
	enc := base64.StdEncoding
	if !strings.HasSuffix(b64, "=") {
		enc = base64.RawStdEncoding
	}
	key, err := enc.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New("webhooktest: Delivery.Secret is not whsec_ and base64")
	}
	return key, nil
}

// Shopify signs d as Shopify does (shopify.dev, "Deliver webhooks through
// HTTPS", "Verify a webhook"): X-Shopify-Hmac-Sha256 is the padded base64
// HMAC-SHA256 of the body under the app's client secret; X-Shopify-Webhook-Id
// is d.ID (else a random UUID), the event id.
func Shopify(d Delivery) (*http.Request, error) { return shopify(d, "X-Shopify-") }

// ShopifyEvents signs d as Shopify does in the header form without X-
// that it also delivers (shopify.dev, "Verify Events deliveries"):
// Shopify-Hmac-Sha256 and Shopify-Webhook-Id, otherwise as Shopify.
func ShopifyEvents(d Delivery) (*http.Request, error) { return shopify(d, "Shopify-") }

func shopify(d Delivery, prefix string) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	sig := base64.StdEncoding.EncodeToString(mac(d.Secret, d.Body))
	return d.request(prefix+"Hmac-Sha256", sig, prefix+"Webhook-Id", d.uuid())
}

// Slack signs d as Slack does (docs.slack.dev, "Verifying requests from
// Slack"): X-Slack-Request-Timestamp is d.Time in Unix seconds,
// X-Slack-Signature "v0=" and the lower-case hex HMAC-SHA256 of
// "v0:TIMESTAMP:BODY" under the signing secret. The event id is in the
// body: an Events API event's event_id, a command's trigger_id.
func Slack(d Delivery) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	ts := d.unix()
	sig := mac(d.Secret, []byte("v0:"+ts+":"), d.Body)
	return d.request("X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0="+hex.EncodeToString(sig))
}

// Twilio signs d as Twilio does (twilio.com/docs/usage/security,
// "Validating requests are coming from Twilio"): X-Twilio-Signature is
// the padded base64 HMAC-SHA1, under the auth token, of d.URL followed by
// the form body's parameters, each name and its value, sorted by name
// (then by value). A JSON body is signed through the URL alone: the
// request's URL is d.URL with the query parameter bodySHA256, the body's
// lower-case hex SHA-256, added. I-Twilio-Idempotency-Token is d.ID (else a
// random UUID). A body that is neither JSON nor a form is an error.
//
// The handler's webhook.Twilio checks the URL it was called at: give it
// d.URL's scheme and host (its publicURL) when they are not the request's
// own, as behind a proxy that terminates TLS.
func Twilio(d Delivery) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	signedURL, params := d.URL, ""
	if json.Valid(d.Body) {
		sum := sha256.Sum256(d.Body)
		sep := "?"
		if strings.Contains(d.URL, "?") {
			sep = "&"
		}
		signedURL += sep + "bodySHA256=" + hex.EncodeToString(sum[:])
	} else {
		form, err := url.ParseQuery(string(d.Body))
		if err != nil {
			return nil, errors.New("webhooktest: Delivery.Body is neither JSON nor a form (Twilio signs the form's parameters)")
		}
		params = sortedParams(form)
	}
	m := hmac.New(sha1.New, []byte(d.Secret))
	m.Write([]byte(signedURL + params))
	d.URL = signedURL
	return d.request("X-Twilio-Signature", base64.StdEncoding.EncodeToString(m.Sum(nil)),
		"I-Twilio-Idempotency-Token", d.uuid())
}

// sortedParams is form as Twilio signs it: names sorted, each followed by
// its values sorted, each value once (twilio-python,
// request_validator.py).
func sortedParams(form url.Values) string {
	names := make([]string, 0, len(form))
	for name := range form {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		values := append([]string(nil), form[name]...)
		sort.Strings(values)
		for i, v := range values {
			if i == 0 || v != values[i-1] {
				b.WriteString(name + v)
			}
		}
	}
	return b.String()
}

// Discord signs d as Discord signs an interaction (discord.com/developers/docs,
// "Interactions", "Receiving and Responding"). X-Signature-Timestamp is
// d.Time in Unix seconds. X-Signature-Ed25519 is the lower-case hex
// Ed25519 signature of TIMESTAMP followed by the body. d.Secret is the
// private key in hex: its 32-byte seed, 64 digits, or the whole 64-byte
// key, 128 digits. The handler holds its public key, DiscordPublicKey.
// The event id is the body's "id".
func Discord(d Delivery) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	key, err := discordKey(d.Secret)
	if err != nil {
		return nil, err
	}
	ts := d.unix()
	sig := ed25519.Sign(key, append([]byte(ts), d.Body...))
	return d.request("X-Signature-Timestamp", ts, "X-Signature-Ed25519", hex.EncodeToString(sig))
}

// DiscordPublicKey returns the public key, 64 hex digits as Discord's
// developer portal shows it, of privateKey, a Delivery.Secret of Discord:
// the key the handler's Config.Secrets returns.
func DiscordPublicKey(privateKey string) (string, error) {
	key, err := discordKey(privateKey)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(key.Public().(ed25519.PublicKey)), nil
}

func discordKey(s string) (ed25519.PrivateKey, error) {
	b, err := hex.DecodeString(s)
	switch {
	case err == nil && len(b) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case err == nil && len(b) == ed25519.PrivateKeySize:
		return ed25519.NewKeyFromSeed(b[:ed25519.SeedSize]), nil
	}
	return nil, errors.New("webhooktest: Delivery.Secret is not an Ed25519 private key in hex (64 or 128 digits)")
}

// Paddle signs d as Paddle Billing does (developer.paddle.com, "Verify
// webhook signatures"): Paddle-Signature is "ts=TIMESTAMP;h1=HEX", HEX the
// lower-case hex HMAC-SHA256 of "TIMESTAMP:BODY" under the notification
// destination's secret key, TIMESTAMP d.Time in Unix seconds. The event id
// is the body's event_id.
func Paddle(d Delivery) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	ts := d.unix()
	sig := mac(d.Secret, []byte(ts+":"), d.Body)
	return d.request("Paddle-Signature", "ts="+ts+";h1="+hex.EncodeToString(sig))
}

// Linear signs d as Linear does (linear.app/developers, "Webhooks"):
// Linear-Signature is the lower-case hex HMAC-SHA256 of the body under the
// webhook's signing secret; Linear-Delivery is d.ID (else a random UUID).
// Linear signs the time inside the body, as webhookTimestamp in Unix
// milliseconds: a JSON object body without one gets d.Time's, added last,
// the rest of its bytes kept. Any other body is sent as it is (webhook's
// Linear refuses a body without webhookTimestamp).
func Linear(d Delivery) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	d.Body = withTimestamp(d.Body, d.at().UnixMilli())
	sig := mac(d.Secret, d.Body)
	return d.request("Linear-Signature", hex.EncodeToString(sig), "Linear-Delivery", d.uuid())
}

// withTimestamp is body, a JSON object, with "webhookTimestamp":ms added
// as its last member when it has none; any other body as it is.
func withTimestamp(body []byte, ms int64) []byte {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil || members == nil {
		return body
	}
	if _, ok := members["webhookTimestamp"]; ok {
		return body
	}
	end := strings.LastIndexByte(string(body), '}')
	head := strings.TrimRight(string(body[:end]), " \t\r\n")
	member := `"webhookTimestamp":` + strconv.FormatInt(ms, 10)
	if !strings.HasSuffix(head, "{") {
		member = "," + member
	}
	return []byte(head + member + string(body[end:]))
}
