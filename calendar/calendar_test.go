package calendar_test

import (
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed

	"github.com/fleetstore/fleetstore/calendar"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// utc parses an RFC 3339 instant ("2026-03-08T05:00:00Z").
func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWindow: the window holding an instant, its edges given in UTC by
// hand from the zone's rules, and its length.
func TestWindow(t *testing.T) {
	tests := []struct {
		name      string
		period    calendar.Period
		zone      string
		at        string // an instant of the window (UTC)
		start     string // its first instant (UTC)
		end       string // the next window's first instant (UTC)
		wantHours int
	}{
		{"February of a leap year", calendar.Month, "UTC", "2024-02-29T23:59:59.999999Z",
			"2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z", 29 * 24},
		{"February of a common year", calendar.Month, "UTC", "2023-02-14T12:00:00Z",
			"2023-02-01T00:00:00Z", "2023-03-01T00:00:00Z", 28 * 24},
		{"February 2100, no leap year (a century)", calendar.Month, "UTC", "2100-02-28T00:00:00Z",
			"2100-02-01T00:00:00Z", "2100-03-01T00:00:00Z", 28 * 24},
		{"February 2000, a leap year (400 years)", calendar.Month, "UTC", "2000-02-29T00:00:00Z",
			"2000-02-01T00:00:00Z", "2000-03-01T00:00:00Z", 29 * 24},
		{"the 31st of July", calendar.Month, "UTC", "2026-07-31T23:00:00Z",
			"2026-07-01T00:00:00Z", "2026-08-01T00:00:00Z", 31 * 24},
		{"August after July, both 31 days", calendar.Month, "UTC", "2026-08-01T00:00:00Z",
			"2026-08-01T00:00:00Z", "2026-09-01T00:00:00Z", 31 * 24},
		{"April, 30 days", calendar.Month, "UTC", "2026-04-30T12:00:00Z",
			"2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z", 30 * 24},
		{"December to the next year", calendar.Month, "UTC", "2026-12-31T23:59:59Z",
			"2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", 31 * 24},
		{"the year's last day", calendar.Day, "UTC", "2026-12-31T23:59:59.999999Z",
			"2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z", 24},
		{"New Year's Day at its first µs", calendar.Day, "UTC", "2027-01-01T00:00:00Z",
			"2027-01-01T00:00:00Z", "2027-01-02T00:00:00Z", 24},
		{"an ISO week across the year (Thursday 31 December)", calendar.Week, "UTC",
			"2026-12-31T08:00:00Z", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", 7 * 24},
		{"a week on its Monday", calendar.Week, "UTC", "2026-12-07T00:00:00Z",
			"2026-12-07T00:00:00Z", "2026-12-14T00:00:00Z", 7 * 24},
		{"a week on its Sunday's last µs", calendar.Week, "UTC", "2026-12-13T23:59:59.999999Z",
			"2026-12-07T00:00:00Z", "2026-12-14T00:00:00Z", 7 * 24},
		{"a month in a zone east of UTC", calendar.Month, "Asia/Tokyo", "2026-01-31T15:30:00Z",
			"2026-01-31T15:00:00Z", "2026-02-28T15:00:00Z", 28 * 24},
		{"New York, summer time starts: 23h", calendar.Day, "America/New_York",
			"2026-03-08T12:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", 23},
		{"New York, summer time ends: 25h", calendar.Day, "America/New_York",
			"2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", 25},
		{"Berlin, summer time starts: 23h", calendar.Day, "Europe/Berlin",
			"2026-03-29T01:30:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", 23},
		{"Berlin, summer time ends: 25h", calendar.Day, "Europe/Berlin",
			"2026-10-25T00:30:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", 25},
		{"Berlin, the week summer time starts: 167h", calendar.Week, "Europe/Berlin",
			"2026-03-25T12:00:00Z", "2026-03-22T23:00:00Z", "2026-03-29T22:00:00Z", 7*24 - 1},
		{"Berlin, March: 31 days less an hour", calendar.Month, "Europe/Berlin",
			"2026-03-31T21:59:59Z", "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z", 31*24 - 1},
		{"Berlin, October: 31 days and an hour", calendar.Month, "Europe/Berlin",
			"2026-10-01T00:00:00Z", "2026-09-30T22:00:00Z", "2026-10-31T23:00:00Z", 31*24 + 1},
		// Midnight skipped: the day starts at the end of the gap, 01:00.
		{"São Paulo 2018, midnight skipped: starts 01:00", calendar.Day, "America/Sao_Paulo",
			"2018-11-04T12:00:00Z", "2018-11-04T03:00:00Z", "2018-11-05T02:00:00Z", 23},
		{"São Paulo 2018, the day before ends at the gap", calendar.Day, "America/Sao_Paulo",
			"2018-11-04T02:59:59.999999Z", "2018-11-03T03:00:00Z", "2018-11-04T03:00:00Z", 24},
		{"São Paulo 2018, the month holding the gap", calendar.Month, "America/Sao_Paulo",
			"2018-11-04T03:00:00Z", "2018-11-01T03:00:00Z", "2018-12-01T02:00:00Z", 30*24 - 1},
		{"Beirut 2026, midnight skipped", calendar.Day, "Asia/Beirut",
			"2026-03-29T10:00:00Z", "2026-03-28T22:00:00Z", "2026-03-29T21:00:00Z", 23},
		{"Beirut 2026, the week holding the gap (from Monday 23 March)", calendar.Week, "Asia/Beirut",
			"2026-03-29T10:00:00Z", "2026-03-22T22:00:00Z", "2026-03-29T21:00:00Z", 7*24 - 1},
		{"Havana 2026, midnight skipped", calendar.Day, "America/Havana",
			"2026-03-08T06:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", 23},
		// Apia skipped 30 December 2011 (UTC−10 to UTC+14).
		{"Apia 2011, the day before the skipped day", calendar.Day, "Pacific/Apia",
			"2011-12-30T09:59:59Z", "2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z", 24},
		{"Apia 2011, the day after the skipped day", calendar.Day, "Pacific/Apia",
			"2011-12-30T10:00:00Z", "2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z", 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := zone(t, tt.zone)
			at, start, end := utc(t, tt.at), utc(t, tt.start), utc(t, tt.end)
			gotStart, gotEnd := calendar.Window(tt.period, loc, at)
			if !gotStart.Equal(start) || !gotEnd.Equal(end) {
				t.Fatalf("Window(%v, %s, %v) = [%v, %v), want [%v, %v)", tt.period, tt.zone, at,
					gotStart.UTC(), gotEnd.UTC(), start, end)
			}
			if got := gotEnd.Sub(gotStart); got != time.Duration(tt.wantHours)*time.Hour {
				t.Errorf("length %v, want %dh", got, tt.wantHours)
			}
			if gotStart.Location() != loc {
				t.Errorf("start in %v, want %v", gotStart.Location(), loc)
			}
			// The edges: the window itself in the middle, exact to the µs.
			e := calendar.Edges(tt.period, loc, at)
			if e[1] != start.UnixMicro() || e[2] != end.UnixMicro() {
				t.Errorf("Edges = %v, want [_, %d, %d, _]", e, start.UnixMicro(), end.UnixMicro())
			}
			before, _ := calendar.Window(tt.period, loc, start.Add(-time.Microsecond))
			_, after := calendar.Window(tt.period, loc, end)
			if e[0] != before.UnixMicro() || e[3] != after.UnixMicro() {
				t.Errorf("Edges = %v, want the windows before and after: [%d, _, _, %d]", e,
					before.UnixMicro(), after.UnixMicro())
			}
		})
	}
}

// TestEdgesSkippedDay: the day Apia skipped has no window; the windows
// around it are the days that lasted, and the edges stay strictly
// ascending.
func TestEdgesSkippedDay(t *testing.T) {
	apia := zone(t, "Pacific/Apia")
	tests := []struct {
		at   string
		want [4]string
	}{
		{"2011-12-30T12:00:00Z", [4]string{"2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z",
			"2011-12-31T10:00:00Z", "2012-01-01T10:00:00Z"}}, // 31 Dec: the day before is 29 Dec
		{"2011-12-29T12:00:00Z", [4]string{"2011-12-28T10:00:00Z", "2011-12-29T10:00:00Z",
			"2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z"}}, // 29 Dec: the next is 31 Dec
	}
	for _, tt := range tests {
		var want [4]int64
		for i, s := range tt.want {
			want[i] = utc(t, s).UnixMicro()
		}
		if got := calendar.Edges(calendar.Day, apia, utc(t, tt.at)); got != want {
			t.Errorf("Edges(Day, Apia, %s) = %v, want %v", tt.at, got, want)
		}
	}
}

// TestEdgesExact: an instant at an edge is in the window it starts, one µs
// before it in the window before, and the edges are the windows' µs.
func TestEdgesExact(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	edge := utc(t, "2026-10-31T23:00:00Z") // 1 November, 00:00 CET
	prev := calendar.Edges(calendar.Month, berlin, edge.Add(-time.Microsecond))
	at := calendar.Edges(calendar.Month, berlin, edge)
	if prev[2] != edge.UnixMicro() || at[1] != edge.UnixMicro() {
		t.Fatalf("at the edge %d: edges %v before it, %v at it", edge.UnixMicro(), prev, at)
	}
	if [3]int64(prev[1:]) != [3]int64(at[:3]) {
		t.Errorf("the edges one µs apart across a boundary, %v and %v, must overlap by three", prev, at)
	}
	// Sub-µs parts of the instant change nothing.
	if got := calendar.Edges(calendar.Month, berlin, edge.Add(999*time.Nanosecond)); got != at {
		t.Errorf("edges at +999ns %v, want %v", got, at)
	}
}

// TestWindowProperties: for random instants over 1990–2040 in zones with
// and without summer time, the window holds the instant, starts on its
// first day's first instant, meets the next window, and agrees with Edges.
func TestWindowProperties(t *testing.T) {
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "America/Sao_Paulo",
		"Asia/Beirut", "America/Havana", "Pacific/Apia", "Australia/Lord_Howe", "Asia/Kolkata",
		"Pacific/Chatham"}
	lo, hi := utc(t, "1990-01-01T00:00:00Z").Unix(), utc(t, "2040-01-01T00:00:00Z").Unix()
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range zones {
		loc := zone(t, name)
		for range 2000 {
			at := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9))
			for p := calendar.Day; p <= calendar.Month; p++ {
				start, end := calendar.Window(p, loc, at)
				if at.Before(start) || !at.Before(end) {
					t.Fatalf("%s %v: %v not in [%v, %v)", name, p, at, start, end)
				}
				if y, m, d := start.Date(); p == calendar.Month && d != 1 ||
					p == calendar.Week && start.Weekday() != time.Monday &&
						!(name == "Pacific/Apia" && y == 2011 && m == 12) {
					t.Fatalf("%s %v: starts %v", name, p, start)
				}
				if s, _ := calendar.Window(p, loc, end); !s.Equal(end) {
					t.Fatalf("%s %v: window [%v, %v), the next starts at %v", name, p, start, end, s)
				}
				if _, e := calendar.Window(p, loc, start.Add(-time.Nanosecond)); !e.Equal(start) {
					t.Fatalf("%s %v: window [%v, %v), the one before ends at %v", name, p, start, end, e)
				}
				e := calendar.Edges(p, loc, at)
				if e[1] != start.UnixMicro() || e[2] != end.UnixMicro() || e[0] >= e[1] || e[2] >= e[3] {
					t.Fatalf("%s %v: Edges %v for [%v, %v)", name, p, e, start, end)
				}
			}
		}
	}
}

func TestPeriod(t *testing.T) {
	for p := calendar.Day; p <= calendar.Month; p++ {
		got, err := calendar.ParsePeriod(p.String())
		if err != nil || got != p || !p.Valid() {
			t.Errorf("ParsePeriod(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := calendar.ParsePeriod("year"); err == nil {
		t.Error(`ParsePeriod("year"): no error`)
	}
	for _, p := range []calendar.Period{0, -1, 4} {
		if p.Valid() {
			t.Errorf("%v is valid", p)
		}
		if s, e := calendar.Window(p, nil, time.Now()); !s.IsZero() || !e.IsZero() {
			t.Errorf("Window(%v) = %v, %v, want zero times", p, s, e)
		}
		if e := calendar.Edges(p, nil, time.Now()); e != [4]int64{} {
			t.Errorf("Edges(%v) = %v, want zero", p, e)
		}
	}
	// nil is UTC.
	at := time.Date(2026, 5, 17, 13, 0, 0, 0, time.UTC)
	if e := calendar.Edges(calendar.Week, nil, at); e != calendar.Edges(calendar.Week, time.UTC, at) {
		t.Errorf("Edges with a nil location %v, want UTC's", e)
	}
}

// BenchmarkEdges: a quota's charge computes the edges once per Hit.
func BenchmarkEdges(b *testing.B) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = calendar.Edges(calendar.Month, berlin, at)
	}
}

func TestHolding(t *testing.T) {
	e := [4]int64{10, 20, 30, 40}
	for _, tt := range []struct {
		now  int64
		want int
	}{{9, -1}, {10, 0}, {19, 0}, {20, 1}, {29, 1}, {30, 2}, {39, 2}, {40, -1}} {
		if got := calendar.Holding(e, tt.now); got != tt.want {
			t.Errorf("Holding(%v, %d) = %d, want %d", e, tt.now, got, tt.want)
		}
	}
}
