package driver

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore/internal/urlparam"
)

// Timeouts reads the client timeouts names from q as Go durations, for a
// driver's Open. A user's timeout may be shorter than the budget, never
// longer: a dial or read outliving the budget would outlive the call
// (CONTRACT T1, T4). An absent one is the budget. Errors wrap ErrInvalid
// and name the parameter.
func Timeouts(q url.Values, budget time.Duration, names ...string) (map[string]time.Duration,
	error) {
	out := make(map[string]time.Duration, len(names))
	for _, name := range names {
		out[name] = budget
		if !q.Has(name) {
			continue
		}
		v := q.Get(name)
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > budget {
			return nil, Invalid("url: "+name, "want a Go duration between 1ns and the timeout ("+
				budget.String()+"), got "+Quote(v))
		}
		out[name] = d
	}
	return out, nil
}

// Quote quotes a URL parameter's value for an error, cut at 64 bytes.
func Quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strconv.Quote(s)
}

// CheckParams returns an ErrInvalid error naming the first URL parameter in
// q that is not in accepted, listing the accepted ones (the common
// parameters the Store reads, timeout, key_prefix and fallback_*,
// included). Drivers call it from Open.
func CheckParams(q url.Values, accepted ...string) error {
	keys := make([]string, 0, len(q))
	for k := range q {
		if !slices.Contains(accepted, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	all := append(slices.Clone(urlparam.Store), accepted...)
	return Invalid("url: "+keys[0], "unknown parameter (accepted: "+strings.Join(all, ", ")+")")
}

// RefuseParams returns an ErrInvalid error naming the first parameter of q
// (in sorted order) that refused holds, with its reason: a parameter of the
// client library's own URL format that the driver does not support because
// it would break the contract (e.g. "max_retries": "a script whose reply was
// lost is never re-sent (CONTRACT T5)"). Drivers call it from Open, before
// CheckParams.
func RefuseParams(q url.Values, refused map[string]string) error {
	var names []string
	for name := range q {
		if _, ok := refused[name]; ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return Invalid("url: "+names[0], "not supported: "+refused[names[0]])
}

// CheckAddrs checks the addresses of a URL whose host is one server and
// whose other servers are addr= parameters (the Redis family's form): the
// host and every addr are one HOST:PORT each — no list (several servers
// go in addr=), no userinfo (the password goes once, in the URL's own
// userinfo) — so that an error never quotes a password and a list never
// reaches a resolver as one name. Errors wrap ErrInvalid and name the
// parameter; they quote no address.
func CheckAddrs(host string, addrs []string) error {
	if strings.Contains(host, ",") {
		return Invalid("url: host", "one HOST:PORT; give the other servers as addr= parameters")
	}
	if _, port, err := net.SplitHostPort(host); err == nil && !isPort(port) {
		return Invalid("url: host", "the port must be a number 1–65535")
	}
	for i, a := range addrs {
		why := ""
		switch {
		case strings.Contains(a, "@"):
			why = "takes HOST:PORT, no user or password (give them once, in the URL's userinfo)"
		case strings.ContainsAny(a, ",/?#"):
			why = "takes one HOST:PORT; repeat addr= for each server"
		case a == "":
			why = "is empty"
		default:
			if _, port, err := net.SplitHostPort(a); err != nil || !isPort(port) {
				why = "takes HOST:PORT with a port number"
			}
		}
		if why != "" {
			return Invalid("url: addr", "addr["+strconv.Itoa(i)+"] "+why)
		}
	}
	return nil
}

// isPort reports a decimal port number, 1–65535.
func isPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && p[0] != '+'
}
