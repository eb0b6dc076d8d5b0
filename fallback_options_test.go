package fleetstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/observe"
)

// TestFallbackOptions: a fallback out of range, from the URL or from
// WithFallback, is ErrInvalid naming the field, and no driver is opened;
// WithFallback's non-zero fields override the URL's; a fallback_* of the
// URL never reaches the driver.
func TestFallbackOptions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url       string
		fb        *fleetstore.Fallback
		wantField string
	}{
		{url: "fake://?fallback_nodes=0", wantField: "url: fallback_nodes"},
		{url: "fake://?fallback_nodes=-3", wantField: "url: fallback_nodes"},
		{url: "fake://?fallback_nodes=1000001", wantField: "url: fallback_nodes"},
		{url: "fake://?fallback_nodes=x", wantField: "url: fallback_nodes"},
		{url: "fake://?fallback_nodes=2&fallback_nodes=3", wantField: "url: fallback_nodes"},
		{url: "fake://?fallback_share=0", wantField: "url: fallback_share"},
		{url: "fake://?fallback_share=1.5", wantField: "url: fallback_share"},
		{url: "fake://?fallback_share=NaN", wantField: "url: fallback_share"},
		{url: "fake://?fallback_share=0.0000001", wantField: "url: fallback_share"},
		{url: "fake://?fallback_nodes=2&fallback_share=0.5", wantField: "url: fallback_nodes"},
		{url: "fake://?fallback_nodes=2&fallback_outbox=-1", wantField: "url: fallback_outbox"},
		{url: "fake://?fallback_nodes=2&fallback_claims=-1", wantField: "url: fallback_claims"},
		{url: "fake://?fallback_nodes=2&fallback_recent=-1", wantField: "url: fallback_recent"},
		{url: "fake://?fallback_nodes=2&fallback_recent=many", wantField: "url: fallback_recent"},
		{url: "fake://?fallback_outbox=10", wantField: "fallback"}, // sizes alone: no share
		{url: "fake://", fb: &fleetstore.Fallback{}, wantField: "fallback"},
		{url: "fake://", fb: &fleetstore.Fallback{Nodes: -1}, wantField: "fallback.nodes"},
		{url: "fake://", fb: &fleetstore.Fallback{Share: 2}, wantField: "fallback.share"},
		{url: "fake://", fb: &fleetstore.Fallback{Nodes: 2, Share: 0.5}, wantField: "fallback.nodes"},
		{url: "fake://", fb: &fleetstore.Fallback{Nodes: 2, OutboxSize: -1}, wantField: "fallback.outbox_size"},
		{url: "fake://", fb: &fleetstore.Fallback{Nodes: 2, LocalClaims: -1}, wantField: "fallback.local_claims"},
		{url: "fake://", fb: &fleetstore.Fallback{Nodes: 2, RecentCommits: -1}, wantField: "fallback.recent_commits"},
		{url: "fake://?fallback_nodes=2", fb: &fleetstore.Fallback{Nodes: -1}, wantField: "fallback.nodes"},
		{url: "fake://?fallback_nodes=2&fallback_outbox_dir=", wantField: "url: fallback_outbox_dir"},
		{url: "fake://?fallback_nodes=2&fallback_outbox_dir=%00", wantField: "url: fallback_outbox_dir"},
		{url: "fake://", fb: &fleetstore.Fallback{Nodes: 2, OutboxDir: "a\x00b"}, wantField: "fallback.outbox_dir"},
		{url: "fake://", fb: &fleetstore.Fallback{Nodes: 2, OutboxDir: strings.Repeat("d", 4097)}, wantField: "fallback.outbox_dir"},
	} {
		d := &fakeDriver{conn: &fakeConn{}}
		var opts []fleetstore.Option
		if tt.fb != nil {
			opts = append(opts, fleetstore.WithFallback(*tt.fb))
		}
		st, err := fleetstore.OpenDriver(d, tt.url, opts...)
		var ie *fleetstore.InvalidError
		if st != nil || !errors.Is(err, fleetstore.ErrInvalid) || !errors.As(err, &ie) || ie.Field != tt.wantField {
			t.Errorf("open %s with %+v: %v, want ErrInvalid naming %q", tt.url, tt.fb, err, tt.wantField)
		}
		if len(d.cfgs) != 0 {
			t.Errorf("open %s with %+v: the driver was opened", tt.url, tt.fb)
		}
	}

	// The URL gives the fleet's size, the code the callbacks; the
	// fallback_* parameters are the Store's, not the driver's.
	d := &fakeDriver{conn: failing(func(context.Context) error { return errors.New("connection refused") })}
	st, err := fleetstore.OpenDriver(d, "fake://h?fallback_nodes=4&fallback_outbox=2&x=1",
		fleetstore.WithFallback(fleetstore.Fallback{OnConflict: func(fleetstore.Conflict) {}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if q := d.lastConfig(t).URL.RawQuery; q != "x=1" {
		t.Errorf("driver's query %q, want only x=1", q)
	}
	res, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil)
	if err != nil || !res.Local {
		t.Fatalf("hit on a refusing store: %+v %v, want a local decision (the URL's fallback)", res, err)
	}
	// 4 nodes: the 1s/10s bucket (burst 10) is 4s/10s here, 2 hooks.
	res, _ = st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil)
	if res3, _ := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil); res.Outcome != fleetstore.OK || res3.Outcome != fleetstore.RateLimited {
		t.Errorf("hits 2 and 3 at a share of 1/4: %v %v, want ok then rate_limited", res.Outcome, res3.Outcome)
	}
	claims := []fleetstore.Claim{testClaim, testClaim, testClaim}
	claims[1].Key, claims[2].Key = "d-2", "d-3"
	if err := st.Commit(context.Background(), claims...); err == nil || !strings.Contains(err.Error(), "outbox full") {
		t.Errorf("3 commits into the URL's outbox of 2: %v, want the third refused", err)
	}

	// No fallback: Stats is zero, Result.Local never set.
	plain := openFake(t, &fakeConn{})
	if s := plain.FallbackStats(); s != (observe.Stats{}) {
		t.Errorf("Stats without a fallback: %+v, want zero", s)
	}
}
