// Package redisurl checks a store URL of the Redis family's drivers
// (redis, valkey) before the client library's own parser reads it. Each
// URL has one of three forms, told apart by its parameters:
//
//	redis://[[USER]:PASSWORD@]HOST:PORT[/DB]                 one server
//	redis://HOST:PORT?addr=HOST2:PORT2[&addr=…]              a cluster
//	redis://SENTINEL:PORT[/DB]?master_name=NAME[&addr=…]     a Sentinel-managed master
//
// What is the same in both drivers is checked here, once: the parameters
// each form takes, the addresses, the TLS-only parameters, the client
// timeouts (at most the budget, CONTRACT T1, T4), a cluster's database 0.
// The TLS files and the timeouts are taken out of the query, which then
// goes to go-redis's or valkey-go's ParseURL. The TLS files are read into
// the client's TLS config afterwards ([Checked.TLS]).
package redisurl

import (
	"crypto/tls"
	"net/url"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/tlsfiles"
)

// Form is a URL's form.
type Form int

// The forms.
const (
	Single   Form = iota // one server
	Cluster              // a cluster: any addr= parameter, or the cluster scheme
	Sentinel             // a Sentinel-managed master: the hosts are Sentinels
)

// String names f for an error: "one-server", "cluster" or "Sentinel".
func (f Form) String() string {
	switch f {
	case Cluster:
		return "cluster"
	case Sentinel:
		return "Sentinel"
	}
	return "one-server"
}

// Spec is a driver's URL format.
type Spec struct {
	TLSScheme     string // the scheme of TLS URLs: "rediss"
	ClusterScheme string // a scheme that always means a cluster, or ""
	Master        string // the parameter naming a Sentinel-managed master
	// The parameters each form accepts; skip_verify and the TLS files
	// among them are refused on a URL without TLS.
	Single, Cluster, Sentinel []string
	Timeouts                  []string // the client timeouts: Go durations
}

// Checked is a store URL that passed [Spec.Check].
type Checked struct {
	Form Form
	// URL is the URL as given but its query: a cluster's has no path. A
	// driver may change it for its parser.
	URL url.URL
	// Query holds the parameters left for the client library's parser:
	// the TLS files and the timeouts are taken out. A driver takes out its
	// own parameters too, before [Checked.String].
	Query    url.Values
	Files    url.Values               // the TLS files given, for [Checked.TLS]
	Timeouts map[string]time.Duration // each timeout, the budget when absent
}

// Check checks cfg.URL against s and returns it ready for the client
// library's parser. Errors wrap driver.ErrInvalid, name the parameter (or
// "url: host", "url: path") and never quote the URL's userinfo.
func (s *Spec) Check(cfg driver.Config) (*Checked, error) {
	u, q := *cfg.URL, cfg.URL.Query()
	f := s.form(u.Scheme, q)
	if err := rediscore.CheckParams(q, f.String(), s.params(f), s.Single, s.Cluster, s.Sentinel); err != nil {
		return nil, err
	}
	if err := driver.CheckAddrs(u.Host, q["addr"]); err != nil {
		return nil, err
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, driver.Invalid("url", "want "+u.Scheme+"://[[USER]:PASSWORD@]HOST:PORT[/DB]")
	}
	if u.Scheme != s.TLSScheme {
		if name := tlsfiles.Given(q); name != "" || q.Has("skip_verify") {
			if name == "" {
				name = "skip_verify"
			}
			return nil, driver.Invalid("url: "+name, "only for "+s.TLSScheme+":// (TLS)")
		}
	}
	if f == Sentinel && q.Get(s.Master) == "" {
		return nil, driver.Invalid("url: "+s.Master,
			"empty: want the name Sentinel monitors the master under")
	}
	timeouts, err := driver.Timeouts(q, cfg.Timeout, s.Timeouts...)
	if err != nil {
		return nil, err
	}
	if f == Cluster {
		if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
			return nil, driver.Invalid("url: path",
				"a cluster has only database 0, got "+driver.Quote(u.Path))
		}
		u.Path, u.RawPath = "", ""
	}
	for _, name := range s.Timeouts {
		q.Del(name) // the clients would also take other formats
	}
	return &Checked{Form: f, URL: u, Query: q, Files: tlsfiles.Take(q), Timeouts: timeouts}, nil
}

// form tells a URL's form from its scheme and parameters.
func (s *Spec) form(scheme string, q url.Values) Form {
	switch {
	case q.Has(s.Master):
		return Sentinel
	case len(q["addr"]) > 0 || (s.ClusterScheme != "" && scheme == s.ClusterScheme):
		return Cluster
	}
	return Single
}

// params are the parameters form f accepts.
func (s *Spec) params(f Form) []string {
	switch f {
	case Cluster:
		return s.Cluster
	case Sentinel:
		return s.Sentinel
	}
	return s.Single
}

// String is the URL for the client library's parser: c.URL with c.Query.
func (c *Checked) String() string {
	u := c.URL
	u.RawQuery = c.Query.Encode()
	return u.String()
}

// TLS completes t, the TLS config the client library's parser built (nil:
// the URL has no TLS, and TLS does nothing). It reads the TLS files into
// t. On a Sentinel URL it verifies each server under its own address:
// both parsers name the first Sentinel as the server of every TLS
// connection, the master's too. Errors are tlsfiles.Apply's.
func (c *Checked) TLS(t *tls.Config) error {
	if t == nil {
		return nil
	}
	if c.Form == Sentinel {
		t.ServerName = ""
	}
	return tlsfiles.Apply(t, c.Files)
}
