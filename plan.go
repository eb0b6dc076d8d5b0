package fleetstore

import (
	"fmt"
	"strconv"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/fault"
)

// Plan is the limits a tenant's hooks are charged, in order, all or
// nothing: a tier such as "free" or "pro", built once at start-up and
// shared by every tenant on it (package webhook takes one per tenant,
// Config.Plan). A byte limit or quota (Limit.InBytes) is charged a hook's
// body length in bytes, any other limit one unit. A plan may hold
// calendar quotas (NewQuota) beside its rate limits: "10 a second, 10 000
// a month" is charged in one Hit, all or nothing (CONTRACT §3.2).
//
// Moving a tenant to another plan needs no Reset: its buckets hold a TAT,
// a time, which the new plan's limits read at their own emission interval
// and capacity. On a smaller plan a tenant whose TAT is further ahead than
// the new capacity is refused until it has drained to it (at most the old
// capacity); on a larger one it has the new headroom at once. Reset
// forgives that debt: the next hook meets full buckets of the new plan.
type Plan []Limit

// Check reports whether p can be charged: at most MaxCharges limits, rate
// limits and quotas alike, no zero Limit, no kind twice. Its errors match ErrInvalid and name the limit
// (plan[2]).
func (p Plan) Check() error {
	if len(p) > MaxCharges {
		return planErr("plan", fmt.Sprintf("at most %d limits, got %d", MaxCharges, len(p)))
	}
	for i, l := range p {
		field := "plan[" + strconv.Itoa(i) + "]"
		if !l.valid() {
			return planErr(field, "the zero Limit: build it with NewLimit, NewByteLimit or NewQuota")
		}
		for _, m := range p[:i] {
			if m.kind == l.kind {
				return planErr(field, fmt.Sprintf("kind %q charged twice", l.kind))
			}
		}
	}
	return nil
}

// Charges appends to dst the charges of one hook of bodyBytes bytes for
// tenant, one per limit of p in order, and returns the extended slice:
// with a dst of capacity MaxCharges it allocates nothing.
func (p Plan) Charges(dst []Charge, tenant string, bodyBytes int64) []Charge {
	for _, l := range p {
		cost := int64(1)
		if l.bytes {
			cost = bodyBytes
		}
		dst = append(dst, l.Charge(tenant, cost))
	}
	return dst
}

func planErr(field, why string) error {
	return fault.New("plan", driver.Invalid(field, why))
}
