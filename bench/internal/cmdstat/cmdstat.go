// Package cmdstat reads Redis's INFO commandstats section, for the bench
// commands that report a script's server time per call.
package cmdstat

import "strings"

// Stat is one command's line of INFO commandstats: its name (lower case,
// without "cmdstat_"), its calls and its µs per call, as the server wrote
// them.
type Stat struct {
	Name, Calls, UsecPerCall string
}

// Parse returns the commands of an INFO commandstats reply in the server's
// order, leaving out INFO and CONFIG (the bench's own commands).
func Parse(info string) []Stat {
	var out []Stat
	for line := range strings.SplitSeq(info, "\n") {
		name, kv, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || name == "info" || name == "config" {
			continue
		}
		s := Stat{Name: name}
		for f := range strings.SplitSeq(kv, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				s.Calls = v
			case "usec_per_call":
				s.UsecPerCall = v
			}
		}
		out = append(out, s)
	}
	return out
}
