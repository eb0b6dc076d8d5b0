// Package webhook is an http.Handler for one webhook endpoint in front of
// a fleetstore.Store: it verifies a provider's delivery, charges the
// tenant and claims the event in one round trip, hands the hook to a
// durable Sink, settles the claim, and answers as the provider expects.
//
//	store, err := fleetstore.Open(os.Getenv("FLEETSTORE_URL"),
//		fleetstore.WithFallback(fleetstore.Fallback{Nodes: 8}))
//	if err != nil {
//		return err
//	}
//	h, err := webhook.New(webhook.Config{
//		Store:    store,
//		Provider: webhook.GitHub(),
//		Secrets:  func(tenant string) ([]string, error) { return secretsOf(tenant) },
//		Tenant: func(r *http.Request, _ []byte) (string, error) {
//			return r.PathValue("tenant"), nil
//		},
//		Sink:   queue, // a webhook.Sink: Store(ctx, hook) makes it durable
//		Limits: []fleetstore.Limit{hooksPerSecond, bodyBytes},
//	})
//	if err != nil {
//		return err
//	}
//	mux.Handle("POST /hooks/github/{tenant}", h)
//
// # A delivery, in order
//
//  1. The body is read, at most Config.MaxBody bytes: 413 over it, 400
//     when the read fails (never a truncated body).
//  2. Config.Tenant names the tenant (404 when it cannot, or when
//     Config.Secrets says ErrUnknownTenant).
//  3. The provider verifies the signature with the tenant's secrets
//     (Config.Secrets), compared in constant time: 401 when it fails, and
//     nothing is charged or claimed — a POST whose signature fails,
//     whatever event id it names, spends no quota and holds no claim. A
//     signature that verifies is another matter for GitHub, Shopify,
//     Twilio and Linear (see "Replay").
//  4. The provider names the event (400 without one).
//  5. One Store.Hit charges every Config.Limits (a byte limit or quota
//     the body's length, any other one unit) and claims (tenant, provider, event id)
//     for a fresh hook id. A denial (RateLimited, or ErrOverCapacity for
//     a provider that does not retry) costs a second round trip, the
//     claim alone (see "Statuses").
//  6. OK: the Sink stores the hook, within Config.SinkTimeout, on a
//     context detached from the request; then Commit (stored: 202, or
//     the provider's AcceptStatus) or Release (not stored: 503, so that
//     the provider's retry is taken), within Config.SettleTimeout,
//     detached too. A hook answered as stored is stored; its claim is
//     committed unless the Commit fails, which is logged once: with a
//     fallback an outage does not fail it (the commit is queued in the
//     outbox, to be replayed) but a full outbox does;
//     without one, an outage or ErrClosed leaves the claim pending until
//     Config.PendingTTL, and a redelivery after that is stored again (the
//     Sink sees the event twice: give it the hook's event id to dedupe
//     on, or give the Store a fallback).
//
// Every answer after a Hit carries the RateLimit-Policy and RateLimit
// fields of the tenant's buckets (package headers; Config.LegacyHeaders
// adds X-RateLimit-*), and Retry-After when the sender should come back.
//
// # Statuses
//
// Every answer is one row of this table, in the order a delivery meets
// them. "Retries" is Provider.Retries: a provider that redelivers a
// delivery not answered 2xx on its own (all built-in ones but GitHub,
// Twilio and Discord).
//
//	outcome                        status                        Retry-After
//	not a POST                     405 Method Not Allowed
//	body over Config.MaxBody       413 Request Entity Too Large
//	body unreadable                400 Bad Request
//	unknown tenant                 404 Not Found
//	signature fails                401 Unauthorized
//	secrets unusable               500 Internal Server Error
//	handshake                      200 OK
//	no event id                    400 Bad Request
//	Config.Plan invalid            500 Internal Server Error
//	OK, stored                     202 Accepted
//	OK over a quota, defer         202 Accepted
//	OK, the Sink failed            503 Service Unavailable       Config.RetryAfter
//	Duplicate                      200 OK
//	Pending                        409 Conflict                  the claim's time left
//	denied, new, Retries           429 Too Many Requests         the denied charges'
//	denied, new, not Retries       202 Accepted
//	over a quota, drop, new        202 Accepted
//	ErrOverCapacity, Retries       413 Request Entity Too Large
//	ErrInvalid: tenant, event id   400 Bad Request
//	ErrInvalid: hook id, Node      500 Internal Server Error
//	store out, closed, cancelled   503 Service Unavailable       Config.RetryAfter
//
// A stored, deferred or dropped delivery is answered 202, or the provider's
// AcceptStatus (Accepter: 200 for Paddle, Linear, Discord and Twilio);
// it and a Duplicate carry the provider's own body for an Acker
// (Discord's deferred interaction response, Twilio's empty TwiML).
// "handshake" is a verified request that is the sender's check of the
// endpoint, answered as the provider asks (Handshaker: Slack's
// url_verification, Discord's PING), nothing charged or claimed.
// "unknown tenant" is Config.Tenant failing or Config.Secrets saying
// ErrUnknownTenant; "secrets unusable" is any other error of Secrets, or
// an empty secret. After the Sink fails, and on a 429, the claim is
// released, so that the provider's retry is taken; a Sink failure keeps
// the delivery's charges (the retry is charged again, and over the
// tenant's limit is a 429 or deferred). "denied" is a Hit
// that returned RateLimited, or ErrOverCapacity (a body over the byte
// burst) for a provider that does not retry; "new" is what the claim
// alone then says (below); "not Retries" stores the hook with
// Hook.Deferred. "over a quota, drop" is a denial by a quota whose
// policy drops (the section "Quotas"): its claim is released, nothing
// stored. "OK over a quota, defer" is an OK Hit whose count passed a
// quota's n, stored with Hook.OverQuota. A 500 for a bad hook id or Node
// is the handler's own configuration, logged once. "store out" is
// ErrTimeout or ErrUnavailable; "closed" ErrClosed; "cancelled" the
// request's context.
//
// A Hit decides its charges before its claim (CONTRACT §4): a denied one
// does not say whether the delivery is new. So on a denial the handler
// makes one more Hit, the claim alone, charging nothing — a second round
// trip, only then — so that a redelivery of a stored hook is 200 and one
// of a hook being stored 409 whatever the tenant's limit, never 429: a
// denied delivery the claim finds Duplicate or Pending is the row of that
// name.
//
// Stripe (up to 3 days), Paddle (3 days), Standard Webhooks senders such
// as Svix (about a day and a half), Shopify (8 times in 4 hours), Linear
// (3 times in about 7 hours) and Slack (3 times in 5 minutes) redeliver a
// delivery not answered 2xx on their own: a new delivery over the
// tenant's limit has its claim released and is refused with 429, and
// comes back after Retry-After or on the provider's own schedule; a body
// over the byte burst is 413 (it can never conform). GitHub, Twilio
// (unless its URL's connection overrides ask) and Discord do not
// redeliver a failed delivery by themselves, so a 429 or a 413 would lose
// it: for them (Provider.Retries false) the handler keeps the claim
// alone, charging nothing, and stores the hook with Hook.Deferred set, for the
// application to process when the tenant's quota allows; the RateLimit
// fields still say remaining 0 (none for a body over the byte burst, whose
// Hit reported no bucket). A body over Config.MaxBody is 413 for every
// provider: it is never read. Deferring
// gives any provider that policy (Shopify removes a subscription that
// fails for long). A Pending delivery is another delivery of the same
// event being stored right now: answering 2xx would lose the event if
// that one fails, so it is 409 with the claim's remaining time.
//
// # Quotas
//
// A plan may hold calendar quotas beside its rate limits
// (fleetstore.NewQuota: "10 000 hooks a month"), charged in the same
// Hit. Config.OverQuota says, per tenant and quota, what happens to a
// delivery over one (the rows "over a quota" and "OK over a quota"):
//
//   - QuotaDefer, the default: stored with Hook.OverQuota naming the
//     quota, for the application to bill or drop.
//   - QuotaRefuse: 429 with a Retry-After to the window's end, for a
//     provider that retries; stored with Hook.Deferred for one that
//     does not.
//   - QuotaDrop: answered as accepted and not stored; OnDelivery is told.
//     A local decision, made while the shared store is out, is refused
//     instead: it is this node's share, not the fleet's count.
//
// Defer is the default because it is the one policy that loses nothing
// the application did not choose to lose. A month's window can end weeks
// after its quota runs out: a 429 outlives Stripe's 3 days of retries,
// and Shopify removes a subscription that fails for long. A drop loses
// the delivery by design. A deferred quota is charged as a shadow
// (fleetstore.Limit.Shadow): it denies nothing, and its count goes on
// past n, so the overage is counted for billing. The plan's rate limits
// still refuse a flood: give a plan with a quota a rate limit too.
// While the store is out, a node decides a quota at its share of what was
// left (fleetstore's degraded mode). A deferred quota is then named in no
// delivery's OverQuota: the node does not know the fleet's count.
//
// A delivery over several quotas is refused if one of them refuses, and
// otherwise dropped if one drops. Delivery.OverQuota names every quota a
// delivery is over, whatever its policy; Delivery.NearLimit names the
// quota whose count it took past NearLimit × n, once per window. The
// RateLimit fields carry each quota as a policy of its own (package
// headers). A quota's windows are those of its zone's calendar at
// Config.Now.
//
// # Replay
//
// GitHub and Shopify sign the body only, Twilio the URL and the
// parameters: neither the event id (a header) nor a timestamp. A delivery
// captured on the way (its body and signature) verifies again, at any
// time, under any event id the sender puts in the header, and by default
// the handler takes it as a new event: charged, stored again. Config.ClaimBody
// closes this for TTL: the claim's key is then the body's SHA-256, so a
// replay under any id is a Duplicate (200), as a redelivery (same body,
// same id) is; the Sink still gets the provider's event id. It costs no
// extra round trip and no extra bytes (a claim is stored under a 16-byte
// digest of its key: the same bytes per committed claim on Redis, about
// 69 measured either way; a second claim per delivery would double them).
// Its price: two
// distinct events with byte-identical bodies are one event, the second
// answered 200 and never stored. The providers' payloads do not rule it
// out: they carry the resource's state and an updated_at in whole
// seconds, so two events a second apart on a resource whose payload did
// not change (a Shopify products/update for a change the payload does not
// show; two GitHub pings drawing the same zen) can be byte for byte the
// same. Linear signs the body, whose webhookTimestamp holds a replay to
// the tolerance (a minute), but not its event id (Linear-Delivery): within
// that minute a replay is a new event, unless ClaimBody. Stripe, Standard
// Webhooks, Slack, Paddle and Discord sign a timestamp (refused outside
// the tolerance) and the event id (Standard Webhooks' in a header, the
// others' in the body): they need no ClaimBody.
//
// # Verification
//
// Every built-in provider but Twilio (HMAC-SHA1) and Discord (Ed25519) is
// HMAC-SHA256 through crypto/hmac, compared in constant time. Each reads
// its headers as the provider's official verifier reads them, so that the
// two refuse the same deliveries. Each is tested against a delivery the
// provider or its official library signed. Which verifier reads which
// spelling, and where each test vector comes from, is written beside
// those tests (provider_test.go). A provider whose signature covers the
// URL (Twilio) is a RequestVerifier. Package webhooktest signs test
// deliveries as each provider signs them.
//
// # Store outage
//
// A Store opened with fleetstore.WithFallback decides a delivery from
// this node's own state while the shared store is out (Hook.Local is
// set) and queues its commit: deliveries are accepted at this node's
// share of every limit. Without one, they are answered 503 with
// Retry-After, which a delivery of GitHub, Twilio or Discord does not
// survive: give their endpoints the degraded mode.
//
// While degraded, RateLimit's r is what this node has left of its share,
// and RateLimit-Policy's q and w stay the fleet's (package headers). With
// 4 nodes and a burst of 200, a sender sees r=49 after one delivery,
// against q=200. A sender that paces itself by r slows down as this node
// must; one that reads q − r as its use of the fleet's limit over-states
// it. t counts in the fleet's units, so it can under-state this node's
// wait; Retry-After does not.
//
// # Logging
//
// Config.Logger (default none) gets one line when a condition starts and
// one when it ends — the Sink failing, a settle failing, deliveries
// failing verification, unusable secrets, unclaimable deliveries (a bad
// hook id or Node) — never one per delivery. Two of them an
// unauthenticated sender can start: deliveries failing verification, and
// unusable secrets (a tenant whose Secrets fails). Each ends only on a
// delivery that verifies a minute or more after the last failure, so a
// sender who keeps starting one between real deliveries gets one line, not
// two per real delivery; an unknown tenant (ErrUnknownTenant) starts
// none. No
// line and no error of the handler holds a secret, a signature or a body;
// the errors of the Sink, of Config.Secrets and of a Provider are logged
// as they are (their text tells the operator what failed), so they must
// hold none either. A panic of the Sink is logged by its type only.
//
// Every line carries the field provider (Provider.Name), and a line that
// starts a condition the field error (what failed). Give the handlers of
// several providers one Logger: a Logger that adds a provider of its own
// writes the key twice.
package webhook
