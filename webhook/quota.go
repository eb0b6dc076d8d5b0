package webhook

import (
	"fmt"
	"time"

	"github.com/fleetstore/fleetstore"
)

// QuotaPolicy is what the handler does with a delivery over a calendar
// quota of its tenant's plan (fleetstore.NewQuota): Config.OverQuota says
// which, per tenant and quota. The zero value is QuotaDefer. The package
// doc's "Quotas" says why.
type QuotaPolicy uint8

// The policies over a quota.
const (
	// QuotaDefer stores a delivery over the quota with Hook.OverQuota
	// naming it, for the application to bill or drop: the outcome
	// OverQuota. The quota is charged as a shadow (fleetstore.Limit.Shadow):
	// it denies nothing, while the plan's rate limits still refuse a
	// flood, and its count goes on past n, so that it counts what to bill.
	QuotaDefer QuotaPolicy = iota
	// QuotaRefuse denies a delivery over the quota as a rate limit does:
	// 429 with a Retry-After to the window's end, for a provider that
	// retries. A provider that does not retry would lose it: the hook is
	// stored with Hook.Deferred, as for every denial.
	QuotaRefuse
	// QuotaDrop answers a delivery over the quota as accepted and stores
	// nothing: the outcome Dropped, with Delivery.OverQuota naming the
	// quota, so that OnDelivery can count it. A delivery decided locally
	// while the shared store is out is refused instead (QuotaRefuse): its
	// denial is this node's share of the quota, not the fleet's count.
	QuotaDrop
)

// String returns "defer", "refuse" or "drop".
func (p QuotaPolicy) String() string {
	switch p {
	case QuotaDefer:
		return "defer"
	case QuotaRefuse:
		return "refuse"
	case QuotaDrop:
		return "drop"
	}
	return fmt.Sprintf("QuotaPolicy(%d)", uint8(p))
}

// ParseQuotaPolicy returns the policy named s: "defer", "refuse" or
// "drop".
func ParseQuotaPolicy(s string) (QuotaPolicy, error) {
	for p := QuotaDefer; p <= QuotaDrop; p++ {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("webhook: no quota policy %q (want defer, refuse or drop)", s)
}

// tariff is a tenant's plan as its deliveries are charged: its limits,
// and for each quota what happens over it.
type tariff struct {
	plan fleetstore.Plan                    // as Config gave it: the RateLimit fields'
	over [fleetstore.MaxCharges]QuotaPolicy // per limit of plan; QuotaDefer for a rate limit
}

// newTariff asks Config.OverQuota (nil: QuotaDefer for all) the policy
// of each quota of plan, a plan Plan.Check passed. It returns false for
// a policy that is none of the three.
func newTariff(plan fleetstore.Plan, tenant string,
	overQuota func(string, fleetstore.Kind) QuotaPolicy) (tariff, bool) {
	t := tariff{plan: plan}
	if overQuota == nil {
		return t, true
	}
	for i, l := range plan {
		if l.IsQuota() && !l.IsShadow() {
			t.over[i] = overQuota(tenant, l.Kind())
			if t.over[i] > QuotaDrop {
				return t, false
			}
		}
	}
	return t, true
}

// enforced reports whether limit i is a quota whose Hit may deny: one
// that refuses or drops (a deferred one is charged as a shadow).
func (t *tariff) enforced(i int) bool {
	l := t.plan[i]
	return l.IsQuota() && !l.IsShadow() && t.over[i] != QuotaDefer
}

// ownQuota reports whether limit i is a quota the plan did not make a
// shadow: its Denied says the delivery is over it.
func (t *tariff) ownQuota(i int) bool { return t.plan[i].IsQuota() && !t.plan[i].IsShadow() }

// charges appends the charges of one delivery of n body bytes for
// tenant at now: a byte limit or quota charged n, any other limit one
// unit, a deferred quota as a shadow.
func (t *tariff) charges(dst []fleetstore.Charge, tenant string, n int64, now time.Time) []fleetstore.Charge {
	for i, l := range t.plan {
		cost := int64(1)
		if l.InBytes() {
			cost = n
		}
		if t.ownQuota(i) && !t.enforced(i) {
			l = l.Shadow()
		}
		dst = append(dst, l.ChargeAt(tenant, cost, now))
	}
	return dst
}

// drops reports whether a denied Hit's answer res is dropped: a quota
// with QuotaDrop denied it and none with QuotaRefuse did. Refuse wins,
// so that a provider's retry after the window's end can store it. A
// local decision (the shared store out) is never dropped: it denied at
// this node's share of what was left, while the fleet may be far below
// n, and a drop cannot be undone. It is refused instead.
func (t *tariff) drops(res *fleetstore.Result) bool {
	if res.Local {
		return false
	}
	drop := false
	for i, b := range res.Quota() {
		if i >= len(t.plan) || !b.Denied || !t.enforced(i) {
			continue
		}
		if t.over[i] == QuotaRefuse {
			return false
		}
		drop = true
	}
	return drop
}
