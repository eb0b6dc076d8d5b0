package fleetstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// Limits of CONTRACT §6.
const (
	maxPartLen   = 1024 // tenant, source_id, key
	maxHookIDLen = 256
	maxNodeLen   = 256
	maxKindLen   = 32
	minTTL       = time.Millisecond
	maxTTL       = 366 * 24 * time.Hour
)

func checkPart(field, v string, maxLen int) error {
	if len(v) < 1 || len(v) > maxLen {
		return driver.Invalid(field, "must be 1–"+strconv.Itoa(maxLen)+" bytes, got "+strconv.Itoa(len(v)))
	}
	return nil
}

func checkKind(field string, k driver.Kind) error {
	if len(k) < 1 || len(k) > maxKindLen || k[0] < 'a' || k[0] > 'z' {
		return driver.Invalid(field, fmt.Sprintf("must match [a-z][a-z0-9_]{0,31}, got %q", string(k)))
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return driver.Invalid(field, fmt.Sprintf("must match [a-z][a-z0-9_]{0,31}, got %q", string(k)))
		}
	}
	return nil
}

func checkTTL(field string, d time.Duration) error {
	if d < minTTL || d > maxTTL {
		return driver.Invalid(field, fmt.Sprintf("must be between 1ms and 366 days, got %v", d))
	}
	return nil
}

// checkCharges validates charges and returns the tenant they share ("" for
// none) and whether any Increment or Capacity has a sub-microsecond part.
func checkCharges(charges []driver.Charge) (tenant string, fractional bool, err error) {
	for i := range charges {
		c := &charges[i]
		f := "charges[" + strconv.Itoa(i) + "]."
		if err := checkKind(f+"kind", c.Kind); err != nil {
			return "", false, err
		}
		if err := checkPart(f+"tenant", c.Tenant, maxPartLen); err != nil {
			return "", false, err
		}
		if i == 0 {
			tenant = c.Tenant
		} else if c.Tenant != tenant {
			return "", false, driver.Invalid(f+"tenant", "every charge and the claim of one Hit must share one tenant")
		}
		for j := 0; j < i; j++ {
			if charges[j].Kind == c.Kind {
				return "", false, driver.Invalid(f+"kind", fmt.Sprintf("kind %q charged twice in one Hit", string(c.Kind)))
			}
		}
		inc := c.Increment.Truncate(time.Microsecond)
		capacity := c.Capacity.Truncate(time.Microsecond)
		fractional = fractional || inc != c.Increment || capacity != c.Capacity
		if inc < time.Microsecond {
			return "", false, driver.Invalid(f+"increment", fmt.Sprintf("must be at least 1µs, got %v", c.Increment))
		}
		if capacity > gcra.MaxCapacity {
			return "", false, driver.Invalid(f+"capacity", fmt.Sprintf("must be at most 366 days, got %v", c.Capacity))
		}
		if inc > capacity {
			return "", false, fmt.Errorf("%s: increment %v > capacity %v: %w", f[:len(f)-1], inc, capacity, driver.ErrOverCapacity)
		}
	}
	return tenant, fractional, nil
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

func checkClaim(field string, c *driver.Claim) error {
	if err := checkPart(field+".tenant", c.Tenant, maxPartLen); err != nil {
		return err
	}
	if err := checkPart(field+".source_id", c.SourceID, maxPartLen); err != nil {
		return err
	}
	if err := checkPart(field+".key", c.Key, maxPartLen); err != nil {
		return err
	}
	if err := checkPart(field+".hook_id", c.HookID, maxHookIDLen); err != nil {
		return err
	}
	if len(c.Node) > maxNodeLen {
		return driver.Invalid(field+".node", "must be at most 256 bytes, got "+strconv.Itoa(len(c.Node)))
	}
	if err := checkTTL(field+".ttl", c.TTL); err != nil {
		return err
	}
	return checkTTL(field+".pending_ttl", c.PendingTTL)
}
