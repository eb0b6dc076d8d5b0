package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Handshaker is a Provider whose sender also checks the endpoint with
// signed requests that are no event: Slack's url_verification (answered
// with its challenge) and Discord's PING (answered {"type":1}). The handler
// asks Handshake once a request verifies, before anything is charged or
// claimed; when ok, it answers 200 with reply as contentType, and the
// request is the Handshake outcome. Deferring keeps it.
type Handshaker interface {
	Provider
	Handshake(h http.Header, body []byte) (reply []byte, contentType string, ok bool)
}

// handshake is p's answer to a verified request that is a handshake.
func handshake(p Provider, h http.Header, body []byte) ([]byte, string, bool) {
	if hs, ok := inner(p).(Handshaker); ok {
		return hs.Handshake(h, body)
	}
	return nil, "", false
}

// Handshake answers Slack's url_verification (docs.slack.dev, "The
// url_verification event"): its challenge, as text/plain.
func (slack) Handshake(_ http.Header, body []byte) ([]byte, string, bool) {
	var req struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &req) != nil || req.Type != "url_verification" || req.Challenge == "" {
		return nil, "", false
	}
	return []byte(req.Challenge), "text/plain", true
}

// Handshake answers Discord's PING, an interaction of type 1
// (discord.com/developers/docs, "Receiving an Interaction"): {"type":1},
// a PONG, as application/json.
func (discord) Handshake(_ http.Header, body []byte) ([]byte, string, bool) {
	var req struct {
		Type int `json:"type"`
	}
	if json.Unmarshal(body, &req) != nil || req.Type != 1 {
		return nil, "", false
	}
	return []byte(`{"type":1}`), "application/json", true
}

// Accepter is a Provider whose sender counts one status alone as
// delivered and retries any other: Paddle and Linear, whose docs ask for
// 200. The handler answers a stored or deferred delivery (202 in the
// package doc's table) with AcceptStatus, read once by New, which refuses
// one outside 200–299 (ErrInvalid, config.provider). Deferring keeps it;
// a wrapper of one's own must implement it too, or the handler answers
// 202.
type Accepter interface {
	Provider
	AcceptStatus() int
}

// acceptStatus is the status p's stored and deferred deliveries are
// answered with: its AcceptStatus when it is an Accepter, else 202; an
// error when that is no 2xx.
func acceptStatus(p Provider) (int, error) {
	a, ok := inner(p).(Accepter)
	if !ok {
		return http.StatusAccepted, nil
	}
	if s := a.AcceptStatus(); s >= 200 && s <= 299 {
		return s, nil
	}
	return 0, fmt.Errorf("its AcceptStatus must be 200–299, got %d", a.AcceptStatus())
}
