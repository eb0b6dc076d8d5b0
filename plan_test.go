package fleetstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore"
)

func TestPlan(t *testing.T) {
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 20))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1000, 8000))
	plan := fleetstore.Plan{hooks, body}
	if err := plan.Check(); err != nil {
		t.Fatal(err)
	}
	var buf [fleetstore.MaxCharges]fleetstore.Charge
	got := plan.Charges(buf[:0], "acme", 500)
	if want := []fleetstore.Charge{hooks.Charge("acme", 1), body.Charge("acme", 500)}; len(got) != 2 ||
		got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Charges: %+v, want %+v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { plan.Charges(buf[:0], "acme", 500) }); n != 0 {
		t.Errorf("Charges into a buffer: %v allocations, want 0", n)
	}
	var many fleetstore.Plan
	for range fleetstore.MaxCharges + 1 {
		many = append(many, hooks)
	}
	for _, c := range []struct {
		plan  fleetstore.Plan
		field string
	}{
		{fleetstore.Plan{hooks, {}}, "plan[1]"},
		{fleetstore.Plan{hooks, body, hooks}, "plan[2]"},
		{many, "plan"},
		{fleetstore.Plan{hooks, fleetstore.Limit{}.Shadow()}, "plan[1]"},
	} {
		err := c.plan.Check()
		var inv *fleetstore.InvalidError
		if !errors.Is(err, fleetstore.ErrInvalid) || !errors.As(err, &inv) || inv.Field != c.field ||
			!strings.Contains(err.Error(), c.field) {
			t.Errorf("Check of %d limits: %v, want ErrInvalid naming %s", len(c.plan), err, c.field)
		}
	}
}
