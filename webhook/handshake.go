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

// AcceptStatus implements Accepter: an interaction response is a 200.
func (discord) AcceptStatus() int { return http.StatusOK }

// Ack implements Acker: a stored interaction is answered with a deferred
// interaction response (discord.com/developers/docs, "Interaction
// Response Object"), as application/json: an application command or a
// modal submit {"type":5} (the user sees a loading state until the
// application edits the response), a message component {"type":6} (the
// message is edited later, no loading state), an autocomplete {"type":8}
// with no choices (it cannot be deferred). Another type gets the table's
// text.
func (discord) Ack(_ http.Header, body []byte) ([]byte, string) {
	var req struct {
		Type int `json:"type"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, ""
	}
	switch req.Type {
	case 2, 5: // APPLICATION_COMMAND, MODAL_SUBMIT
		return []byte(`{"type":5}`), "application/json"
	case 3: // MESSAGE_COMPONENT
		return []byte(`{"type":6}`), "application/json"
	case 4: // APPLICATION_COMMAND_AUTOCOMPLETE
		return []byte(`{"type":8,"data":{"choices":[]}}`), "application/json"
	}
	return nil, ""
}

// Accepter is a Provider whose sender wants another status than 202 for
// a stored delivery: Paddle and Linear, which count 200 alone as
// delivered and retry any other, and Discord (an interaction response is
// a 200). The handler answers a stored or deferred delivery (202 in the
// package doc's table) with AcceptStatus, read once by New, which refuses
// one outside 200–299 (ErrInvalid, config.provider). Deferring keeps it;
// a wrapper of one's own must implement it too, or the handler answers
// 202.
type Accepter interface {
	Provider
	AcceptStatus() int
}

// Acker is a Provider whose sender wants a body of its own in the answer
// to a delivery stored (or deferred) or already stored (Duplicate):
// Discord, whose interactions must be answered with an interaction
// response (a deferred one: the application follows up with the
// interaction's token), and Twilio, which reads the answer as TwiML. The
// handler asks Ack before the Sink has the hook (it may keep the body) and
// answers with reply as contentType, at the row's status (a stored one's:
// Accepter's, or 202; a 204 sends no body); a nil reply is the table's
// text. Deferring keeps it; a wrapper of one's own must implement it too.
type Acker interface {
	Provider
	Ack(h http.Header, body []byte) (reply []byte, contentType string)
}

// ack is the answer's content type and body for a stored or deferred hook
// when the provider is an Acker with a reply for it, else nothing.
func ack(p Provider, hook *Hook) []string {
	a, ok := inner(p).(Acker)
	if !ok {
		return nil
	}
	reply, ct := a.Ack(hook.Header, hook.Body)
	if reply == nil {
		return nil
	}
	return []string{ct, string(reply)}
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
