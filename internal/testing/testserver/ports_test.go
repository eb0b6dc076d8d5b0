package testserver

import "testing"

// TestFreePortNotTwice: a port FreePort returned is not returned again, by
// this process or another one, while it is held.
func TestFreePortNotTwice(t *testing.T) {
	p := FreePort(t)
	ok, err := reservePort(p)
	if err != nil || ok {
		t.Fatalf("reservePort(%d) just after FreePort returned it: %v, %v; want false", p, ok, err)
	}
}
