package webhook

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/headers"
)

// Handler is an http.Handler for one webhook endpoint of one provider. It
// is safe for concurrent use.
type Handler struct {
	cfg      Config
	log      *zap.Logger
	accepted int // the status of a stored or deferred delivery (Accepter)

	verifying, secrets                    senderState // a sender can start them
	claiming, sinking, settling, planning state
}

var _ http.Handler = (*Handler)(nil)

// New returns the handler of cfg. Its errors match fleetstore.ErrInvalid
// and name the field (config.store, config.limits[1], config.pending_ttl,
// …).
func New(cfg Config) (*Handler, error) {
	if err := cfg.required(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	accepted, err := acceptStatus(cfg.Provider)
	if err != nil {
		return nil, invalid("provider", err.Error())
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{cfg: cfg, log: log.With(zap.String("provider", cfg.Provider.Name())),
		accepted: accepted}, nil
}

// bodyKey is the claim key of a body under Config.ClaimBody: "sha256:"
// and its digest in unpadded base64url, 50 bytes.
func bodyKey(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// maxNode is the longest Node a claim takes (fleetstore.Claim.Node).
const maxNode = 256

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// ServeHTTP handles one delivery, in the order of the package doc: read
// the body, verify it, find its tenant and event, Hit, store, settle,
// answer; then hand its Delivery to Config.OnDelivery.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	d := &Delivery{Provider: h.cfg.Provider.Name(), Received: h.cfg.Now()}
	h.serve(w, r, d)
	d.Total = time.Since(start)
	if h.cfg.OnDelivery != nil {
		h.cfg.OnDelivery(d)
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, d *Delivery) {
	if body, t, ok := h.admit(w, r, d); ok {
		h.decide(w, r, d, body, &t)
	}
}

// admit takes a delivery as far as the Store: its body read, its tenant
// named, its signature verified, a handshake answered, its event named,
// its tenant's plan checked and its policies over quota asked. ok is
// false when it answered the delivery.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, d *Delivery) (
	body []byte, t tariff, ok bool) {
	refuse := func(o Outcome) ([]byte, tariff, bool) {
		h.reply(w, d, o)
		return nil, tariff{}, false
	}
	if r.Method != http.MethodPost {
		return refuse(NotPost)
	}
	body, rep := h.read(w, r)
	if rep != noOutcome {
		return refuse(rep)
	}
	tenant, err := h.cfg.Tenant(r, body)
	if err != nil {
		return refuse(UnknownTenant)
	}
	d.Tenant = tenant
	if rep := h.verify(r, body, tenant, d.Received); rep != noOutcome {
		return refuse(rep)
	}
	if reply, ct, ok := handshake(h.cfg.Provider, r.Header, body); ok {
		h.reply(w, d, Handshake, ct, string(reply))
		return nil, tariff{}, false
	}
	event, err := h.cfg.Provider.EventID(r.Header, body)
	if err != nil {
		return refuse(NoEvent)
	}
	d.EventID = event
	plan := h.cfg.Limits
	if h.cfg.Plan != nil {
		plan = h.cfg.Plan(tenant)
		if err := plan.Check(); err != nil {
			h.planning.set(h.log, msgPlan, zap.Error(err))
			return refuse(PlanInvalid)
		}
	}
	t, ok = newTariff(plan, tenant, h.cfg.OverQuota)
	if !ok {
		h.planning.set(h.log, msgPlan, zap.String("error", "Config.OverQuota returned no QuotaPolicy"))
		return refuse(PlanInvalid)
	}
	if h.cfg.Plan != nil || h.cfg.OverQuota != nil {
		h.planning.clear(h.log, "webhook: plans usable again")
	}
	return body, t, true
}

// decide makes the admitted delivery's hook and claim, has one Hit charge
// the tenant's plan and claim the event, and answers its decision: a
// denial through refused, a failure through hitFailed, any other through
// answer.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, d *Delivery, body []byte,
	t *tariff) {
	hook := &Hook{
		ID: h.cfg.NewHookID(), Tenant: d.Tenant, Source: h.cfg.Provider.Name(), EventID: d.EventID,
		Header: r.Header, Body: body, Received: d.Received,
	}
	d.HookID = hook.ID
	claim := fleetstore.Claim{
		Tenant: d.Tenant, SourceID: hook.Source, Key: d.EventID, HookID: hook.ID, Node: h.cfg.Node,
		TTL: h.cfg.TTL, PendingTTL: h.cfg.PendingTTL,
	}
	if h.cfg.ClaimBody {
		claim.Key = bodyKey(body)
	}
	var buf [fleetstore.MaxCharges]fleetstore.Charge
	charges := t.charges(buf[:0], d.Tenant, int64(len(body)), d.Received)

	start := time.Now()
	res, err := h.cfg.Store.Hit(r.Context(), charges, &claim)
	d.Hit = time.Since(start)
	if err == nil {
		d.Local = res.Local
		h.nearLimit(d, t, charges, &res)
		for i, b := range res.Quota() {
			switch {
			case !b.Denied || i >= len(t.plan):
			case res.Local && t.ownQuota(i) && !t.enforced(i):
				// A deferred quota decided locally is over this node's
				// share, not the fleet's n: nothing to bill (CONTRACT §8.2).
			case t.ownQuota(i):
				d.OverQuota = append(d.OverQuota, b.Kind)
			case b.Shadow:
				d.ShadowDenied = append(d.ShadowDenied, b.Kind)
			}
		}
		hook.OverQuota = slices.Clone(d.OverQuota)
	}
	denied := err == nil && res.Outcome == fleetstore.RateLimited
	switch {
	case denied || errors.Is(err, fleetstore.ErrOverCapacity) && !h.cfg.Provider.Retries():
		h.refused(w, r, d, t, res, denied && t.drops(&res), hook, claim)
	case err != nil:
		h.hitFailed(w, d, err)
	default:
		h.answer(w, r, d, t.plan, res, hook, claim)
	}
}

// nearLimit adds to d.NearLimit the kinds whose bucket res's charges took
// past the Config.NearLimit mark: the TAT's lead over now (ResetAfter) is
// over NearLimit × capacity after the charge and was not before it (the
// lead after, less the increment: the charges were taken, on a fresh OK);
// a quota's count is over NearLimit × n after the charge and was not
// before it. A local decision's buckets are this node's share, not the
// fleet's: not reported.
func (h *Handler) nearLimit(d *Delivery, t *tariff, charges []fleetstore.Charge, res *fleetstore.Result) {
	if h.cfg.NearLimit == 0 || res.Outcome != fleetstore.OK || res.Local {
		return
	}
	for i, b := range res.Quota() {
		c := &charges[i]
		if c.IsWindow() {
			// The quota's own n: a deferred quota's charge is a shadow's.
			mark := float64(t.plan[i].Burst()) * h.cfg.NearLimit
			if float64(b.Used) > mark && float64(b.Used-c.Window.Cost) <= mark {
				d.NearLimit = append(d.NearLimit, c.Kind)
			}
			continue
		}
		mark := time.Duration(float64(c.Capacity) * h.cfg.NearLimit)
		if b.ResetAfter > mark && b.ResetAfter-c.Increment <= mark {
			d.NearLimit = append(d.NearLimit, c.Kind)
		}
	}
}

// answer answers a Hit's decision res: Duplicate 200, Pending 409, OK the
// Sink then stored (or 503), each with the fields of package headers.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, d *Delivery, plan fleetstore.Plan,
	res fleetstore.Result, hook *Hook, claim fleetstore.Claim) {
	h.claiming.clear(h.log, "webhook: deliveries are claimed again")
	h.fields(w, d, plan, &res)
	switch res.Outcome {
	case fleetstore.Duplicate:
		h.reply(w, d, Duplicate, ack(h.cfg.Provider, hook)...)
	case fleetstore.Pending:
		h.reply(w, d, Pending)
	case fleetstore.RateLimited:
		// From refused: a new event of a provider that retries, its
		// claim released.
		h.reply(w, d, RateLimited)
	case fleetstore.OK:
		hook.Local = res.Local
		h.store(w, r, d, hook, claim)
	}
}

// refused answers a delivery its charges refused: RateLimited (limited),
// or ErrOverCapacity (a body over the byte burst) for a provider that does
// not retry. Charges are decided before the claim (CONTRACT §4), so a
// second Hit, the claim alone, charging nothing, says what the delivery
// is: a redelivery of a stored hook (Duplicate: 200, never 429), of one
// being stored (Pending: 409), or new (OK): then, when drop (a quota
// that drops denied it), the claim is released and the delivery
// answered Dropped; for a provider that retries, the claim is released
// and the answer is 429; for one that does not, the hook is stored with
// Hook.Deferred (the package doc's "Statuses"). The extra round trip is
// only made on a denial. The RateLimit fields stay the charges' (none
// for ErrOverCapacity).
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, d *Delivery, t *tariff,
	limited fleetstore.Result, drop bool, hook *Hook, claim fleetstore.Claim) {
	start := time.Now()
	res, err := h.cfg.Store.Hit(r.Context(), nil, &claim)
	d.Hit += time.Since(start)
	if err != nil {
		h.hitFailed(w, d, err)
		return
	}
	d.Local = d.Local || res.Local
	if res.Outcome == fleetstore.OK {
		if drop || h.cfg.Provider.Retries() {
			h.release(context.WithoutCancel(r.Context()), d, claim)
		}
		switch {
		case drop:
			res.NBuckets, res.Buckets = limited.NBuckets, limited.Buckets
			h.claiming.clear(h.log, "webhook: deliveries are claimed again")
			h.fields(w, d, t.plan, &res)
			h.reply(w, d, Dropped, ack(h.cfg.Provider, hook)...)
			return
		case h.cfg.Provider.Retries():
			h.answer(w, r, d, t.plan, limited, hook, claim)
			return
		}
		hook.Deferred = true
	}
	res.NBuckets, res.Buckets = limited.NBuckets, limited.Buckets
	h.answer(w, r, d, t.plan, res, hook, claim)
}

// fields sets the fields of package headers for res, the Hit of plan's
// charges made at d.Received.
func (h *Handler) fields(w http.ResponseWriter, d *Delivery, plan fleetstore.Plan, res *fleetstore.Result) {
	headers.Write(w.Header(), res, plan, headers.Options{Legacy: h.cfg.LegacyHeaders,
		Now: func() time.Time { return d.Received }})
}

// read reads the body, at most MaxBody bytes: a larger one is 413, a
// read that fails 400, never a truncated body.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) ([]byte, Outcome) {
	if r.ContentLength > h.cfg.MaxBody {
		return nil, TooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, TooLarge
	case err != nil:
		return nil, Unreadable
	}
	return body, noOutcome
}

// verify checks the delivery's signature under tenant's secrets: 404 for
// a tenant Secrets does not know, 401 when the signature fails, 500 when
// the secrets cannot be had or used. The secrets state is logged when
// Secrets fails (not for an unknown tenant) or a secret is unusable, and
// cleared only by a delivery that verifies a minute or more after the last
// failure (senderState): a sender can name a tenant, not sign for it, and
// cannot turn the line on and off between real deliveries.
func (h *Handler) verify(r *http.Request, body []byte, tenant string, now time.Time) Outcome {
	secrets, err := h.cfg.Secrets(tenant)
	if errors.Is(err, ErrUnknownTenant) {
		return UnknownTenant
	}
	if err == nil {
		err = checkSecrets(h.cfg.Provider.Name(), secrets)
	}
	if err == nil {
		err = verifyDelivery(h.cfg.Provider, r, body, secrets, now)
		if err != nil && !errors.Is(err, ErrSecret) {
			// ErrSignature, or any error of a custom Provider but ErrSecret.
			h.verifying.set(h.log, now, msgUnverified, zap.Error(err))
			return Forged
		}
	}
	if err != nil { // Secrets failed, or a secret is unusable: ours to fix
		h.secrets.set(h.log, now, msgSecrets, zap.Error(err))
		return SecretsUnusable
	}
	h.secrets.clear(h.log, now, "webhook: secrets usable again")
	h.verifying.clear(h.log, now, "webhook: deliveries verify again")
	return noOutcome
}

// The log lines of conditions, each logged once until it ends.
const (
	msgUnverified = "webhook: a delivery failed signature verification" +
		" (logged once until one verifies, a minute after the last failure)"
	msgSecrets = "webhook: cannot verify deliveries: secrets unusable" +
		" (logged once until a delivery verifies, a minute after the last failure)"
	msgUnclaimable = "webhook: deliveries cannot be claimed: a bad hook id or node," +
		" the handler's configuration (logged once until one is claimed)"
	msgSink = "webhook: the sink fails; deliveries are answered 503" +
		" (logged once until it stores again)"
	msgCommit = "webhook: a commit failed after the hook was stored: answered as stored;" +
		" without a commit the claim frees after pending_ttl and a redelivery is stored" +
		" again (logged once until a settle succeeds)"
	msgRelease = "webhook: a release failed; its claim frees after pending_ttl" +
		" (logged once until a settle succeeds)"
	msgPlan = "webhook: Config.Plan returned an unusable plan, or Config.OverQuota no policy;" +
		" deliveries are answered 500 (logged once until a plan is usable)"
)

// hitFailed answers a Hit that returned no decision.
func (h *Handler) hitFailed(w http.ResponseWriter, d *Delivery, err error) {
	switch {
	case errors.Is(err, fleetstore.ErrOverCapacity):
		// A body over the byte limit's burst can never conform.
		h.reply(w, d, OverBurst)
	case errors.Is(err, fleetstore.ErrInvalid) && ours(err):
		h.claiming.set(h.log, msgUnclaimable, zap.Error(err))
		h.reply(w, d, Unclaimable)
	case errors.Is(err, fleetstore.ErrInvalid):
		h.reply(w, d, Invalid)
	default:
		// ErrTimeout, ErrUnavailable (no fallback), ErrClosed, the
		// request's cancellation: none is the sender's fault, and the
		// Store logs its outages.
		h.reply(w, d, StoreOut)
	}
}

// ours reports whether an ErrInvalid of a Hit is about what the handler
// put in the claim itself (NewHookID's hook id, Config.Node), not about
// what the sender sent (the tenant, the event id).
func ours(err error) bool {
	var inv *fleetstore.InvalidError
	return errors.As(err, &inv) && (inv.Field == "claim.hook_id" || inv.Field == "claim.node")
}

// store hands hook to the Sink, then commits its claim (stored) or releases
// it (503), both on contexts detached from the request with their own
// budgets: a sender that hangs up cancels neither.
//
// A commit that fails after the Sink stored the hook is still stored (the
// hook is durable) and is logged once: with a fallback an outage cannot
// fail it (the commit is queued in the outbox) but a full outbox can;
// without one, an outage or ErrClosed leaves the claim pending, to free
// after PendingTTL, and a redelivery after that is stored again;
// ErrClaimLost means another delivery took the claim after this one's
// expired: the event may be stored twice.
func (h *Handler) store(w http.ResponseWriter, r *http.Request, d *Delivery, hook *Hook,
	claim fleetstore.Claim) {
	detached := context.WithoutCancel(r.Context())
	// The Acker's answer, from the request: the Sink may keep the body.
	own := ack(h.cfg.Provider, hook)
	start := time.Now()
	err := h.sink(detached, hook)
	d.Sink = time.Since(start)
	if err != nil {
		// The Sink's error is logged as it is: it must not hold the body.
		h.sinking.set(h.log, msgSink, zap.Error(err))
		h.release(detached, d, claim)
		h.reply(w, d, SinkFailed)
		return
	}
	h.sinking.clear(h.log, "webhook: the sink stores again")
	ctx, cancel := context.WithTimeout(detached, h.cfg.SettleTimeout)
	defer cancel()
	start = time.Now()
	err = h.cfg.Store.Commit(ctx, claim)
	d.Settle = time.Since(start)
	h.settled(err, msgCommit)
	switch {
	case hook.Deferred:
		h.reply(w, d, Deferred, own...)
	case len(hook.OverQuota) > 0:
		h.reply(w, d, OverQuota, own...)
	default:
		h.reply(w, d, Stored, own...)
	}
}

// release releases claim within SettleTimeout, on detached: a failure
// leaves the claim pending until PendingTTL (the provider's retry is then
// 409 until it frees), logged once.
func (h *Handler) release(detached context.Context, d *Delivery, claim fleetstore.Claim) {
	ctx, cancel := context.WithTimeout(detached, h.cfg.SettleTimeout)
	defer cancel()
	start := time.Now()
	err := h.cfg.Store.Release(ctx, claim)
	d.Settle = time.Since(start)
	h.settled(err, msgRelease)
}

// settled starts the settling state with msg when err is not nil, and
// ends it when it is.
func (h *Handler) settled(err error, msg string) {
	if err != nil {
		h.settling.set(h.log, msg, zap.Error(err))
		return
	}
	h.settling.clear(h.log, "webhook: settles succeed again")
}

// sink runs the Sink within its budget; a panic is its failure.
func (h *Handler) sink(detached context.Context, hook *Hook) (err error) {
	ctx, cancel := context.WithTimeout(detached, h.cfg.SinkTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("webhook: the sink panicked "+
				"(a %T; its value is not logged: it may hold the body)", p)
		}
	}()
	return h.cfg.Sink.Store(ctx, hook)
}
