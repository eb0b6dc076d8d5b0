package fleetstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// Limits of CONTRACT §6: a claim's are package driver's.
const (
	maxPartLen   = driver.MaxPartLen // tenant, source_id, key
	maxHookIDLen = driver.MaxHookIDLen
	maxNodeLen   = driver.MaxNodeLen
	maxKindLen   = 32
	minTTL       = driver.MinTTL
	maxTTL       = driver.MaxTTL
)

// partReason says why v is not 1–maxLen bytes ("" when it is). Field names
// are built only on failure, so a valid Hit allocates nothing here.
func partReason(v string, maxLen int) string {
	if len(v) < 1 || len(v) > maxLen {
		return "must be 1–" + strconv.Itoa(maxLen) + " bytes, got " + strconv.Itoa(len(v))
	}
	return ""
}

func checkPart(field, v string, maxLen int) error {
	if why := partReason(v, maxLen); why != "" {
		return driver.Invalid(field, why)
	}
	return nil
}

func kindReason(k driver.Kind) string {
	bad := len(k) < 1 || len(k) > maxKindLen || k[0] < 'a' || k[0] > 'z'
	for i := 1; !bad && i < len(k); i++ {
		c := k[i]
		bad = !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_')
	}
	if bad {
		return fmt.Sprintf("must match [a-z][a-z0-9_]{0,31}, got %q", string(k))
	}
	return ""
}

func ttlReason(d time.Duration) string {
	if d < minTTL || d > maxTTL {
		return fmt.Sprintf("must be between 1ms and 366 days, got %v", d)
	}
	return ""
}

// chargeField names field of charges[i].
func chargeField(i int, field string) string {
	return "charges[" + strconv.Itoa(i) + "]." + field
}

// checkCharges validates charges and returns the tenant they share ("" for
// none) and whether any Increment or Capacity has a sub-microsecond part.
func checkCharges(charges []driver.Charge) (tenant string, fractional bool, err error) {
	if len(charges) > driver.MaxCharges {
		return "", false, driver.Invalid("charges", "at most "+strconv.Itoa(driver.MaxCharges)+
			" charges per Hit, got "+strconv.Itoa(len(charges)))
	}
	for i := range charges {
		c := &charges[i]
		if why := kindReason(c.Kind); why != "" {
			return "", false, driver.Invalid(chargeField(i, "kind"), why)
		}
		if why := partReason(c.Tenant, maxPartLen); why != "" {
			return "", false, driver.Invalid(chargeField(i, "tenant"), why)
		}
		if i == 0 {
			tenant = c.Tenant
		} else if c.Tenant != tenant {
			return "", false, driver.Invalid(chargeField(i, "tenant"),
				"every charge and the claim of one Hit must share one tenant")
		}
		for j := 0; j < i; j++ {
			if charges[j].Kind == c.Kind {
				return "", false, driver.Invalid(chargeField(i, "kind"),
					fmt.Sprintf("kind %q charged twice in one Hit", string(c.Kind)))
			}
		}
		if c.IsWindow() {
			if err := checkWindow("charges", i, c); err != nil {
				return "", false, err
			}
			continue
		}
		inc := c.Increment.Truncate(time.Microsecond)
		capacity := c.Capacity.Truncate(time.Microsecond)
		fractional = fractional || inc != c.Increment || capacity != c.Capacity
		if inc < time.Microsecond {
			return "", false, driver.Invalid(chargeField(i, "increment"),
				fmt.Sprintf("must be at least 1µs, got %v", c.Increment))
		}
		if capacity < time.Microsecond {
			return "", false, driver.Invalid(chargeField(i, "capacity"),
				fmt.Sprintf("must be at least 1µs, got %v", c.Capacity))
		}
		if capacity > gcra.MaxCapacity {
			return "", false, driver.Invalid(chargeField(i, "capacity"),
				fmt.Sprintf("must be at most 366 days, got %v", c.Capacity))
		}
		if inc > capacity && !c.Shadow {
			return "", false, fmt.Errorf("charges[%d]: increment %v > capacity %v: %w",
				i, inc, capacity, driver.ErrOverCapacity)
		}
	}
	return tenant, fractional, nil
}

// maxWindow is the longest window a quota's charge may send: a record
// expires at its window's end, and no record lives longer than 366 days
// (G7, C9).
const maxWindow = int64(gcra.MaxCapacity / time.Microsecond)

// maxEdge bounds a window's edges: µs since the epoch that a Lua number,
// a double, holds exactly (past the year 2255).
const maxEdge = 1 << 53

// checkWindow validates c, a quota's window charge, list[i] (CONTRACT
// §3.2): Max in [1, MaxWindowUnits], Cost ≥ 1, Edges strictly ascending
// in [0, 2^53] with no window over 366 days, Increment and Capacity
// zero. A Cost over Max is ErrOverCapacity (G6), but for a shadow
// charge, which never denies.
func checkWindow(list string, i int, c *driver.Charge) error {
	// Names are built only on failure: a valid Hit allocates nothing here.
	name := func(field string) string { return list + "[" + strconv.Itoa(i) + "]." + field }
	w := &c.Window
	if w.Max < 1 || w.Max > driver.MaxWindowUnits {
		return driver.Invalid(name("window.max"),
			fmt.Sprintf("must be 1 to %d, got %d", int64(driver.MaxWindowUnits), w.Max))
	}
	if w.Cost < 1 {
		return driver.Invalid(name("window.cost"),
			"must be at least 1, got "+strconv.FormatInt(w.Cost, 10))
	}
	e := &w.Edges
	bad := e[0] < 0 || e[3] > maxEdge
	for j := 1; j < len(e) && !bad; j++ {
		bad = e[j] <= e[j-1] || e[j]-e[j-1] > maxWindow
	}
	if bad {
		return driver.Invalid(name("window.edges"), fmt.Sprintf("must ascend strictly "+
			"from 0 to 2^53 µs, each window at most 366 days, got %v", *e))
	}
	if c.Increment != 0 || c.Capacity != 0 {
		return driver.Invalid(name("increment"),
			"a window charge has no increment or capacity: both must be 0")
	}
	if w.Cost > w.Max && !c.Shadow {
		return fmt.Errorf("%s[%d]: window cost %d > max %d: %w", list, i, w.Cost, w.Max,
			driver.ErrOverCapacity)
	}
	return nil
}

// truncated returns a copy of charges with Increment and Capacity truncated
// to whole microseconds; the caller's slice is never changed.
func truncated(charges []driver.Charge) []driver.Charge {
	out := make([]driver.Charge, len(charges))
	for i, c := range charges {
		c.Increment = c.Increment.Truncate(time.Microsecond)
		c.Capacity = c.Capacity.Truncate(time.Microsecond)
		out[i] = c
	}
	return out
}

// checkSettle validates claims[i] of a Commit (which needs its TTL) or a
// Release (which needs no TTL).
func checkSettle(op string, i int, c *driver.Claim) error {
	return checkClaim(i, c, op == "commit", false)
}

// checkClaim validates a claim; index is its place in a batch settle, or
// -1 for the claim of a Hit. ttl and pendingTTL say which TTLs the call
// needs. Its errors name "claim.key", "claims[2].key"….
func checkClaim(index int, c *driver.Claim, ttl, pendingTTL bool) error {
	field := func(name string) string {
		if index < 0 {
			return "claim." + name
		}
		return "claims[" + strconv.Itoa(index) + "]." + name
	}
	for _, p := range [...]struct {
		name string
		v    string
		max  int
	}{
		{"tenant", c.Tenant, maxPartLen}, {"source_id", c.SourceID, maxPartLen},
		{"key", c.Key, maxPartLen}, {"hook_id", c.HookID, maxHookIDLen},
	} {
		if why := partReason(p.v, p.max); why != "" {
			return driver.Invalid(field(p.name), why)
		}
	}
	if len(c.Node) > maxNodeLen {
		return driver.Invalid(field("node"), "must be at most 256 bytes, got "+strconv.Itoa(len(c.Node)))
	}
	if why := ttlReason(c.TTL); ttl && why != "" {
		return driver.Invalid(field("ttl"), why)
	}
	if why := ttlReason(c.PendingTTL); pendingTTL && why != "" {
		return driver.Invalid(field("pending_ttl"), why)
	}
	return nil
}
