package fleetstore

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/urlparam"
	"github.com/fleetstore/fleetstore/observe"
)

// Open returns a Store for rawURL, e.g. "memory://", "redis://cache:6379/0",
// "memcached://h1:11211,h2:11211". It parses the common parameters —
// timeout (a Go duration, default 100ms) and key_prefix (default
// "fleetstore") — and hands the rest to the driver, which rejects any it
// does not know. Open does no network I/O and never blocks (T3).
//
// Errors: ErrInvalid for a malformed URL or parameter (naming it, never
// echoing credentials), ErrUnknownScheme for a scheme no imported driver
// registered.
func Open(rawURL string, opts ...Option) (*Store, error) {
	return open(nil, rawURL, opts)
}

// OpenDriver returns a Store on d for rawURL, without the registry, as
// sql.OpenDB is to sql.Open: rawURL's scheme is handed to d as it is, not
// looked up, so tests and driver authors need not register a scheme. The
// common parameters are parsed as by Open, and d.Open gets the same
// Config. OpenDriver does no network I/O of its own.
//
// Errors: as Open's; ErrInvalid for a nil d.
func OpenDriver(d driver.Driver, rawURL string, opts ...Option) (*Store, error) {
	if d == nil || isNilPointer(d) {
		return nil, openErr(driver.Invalid("driver", "is nil"))
	}
	return open(d, rawURL, opts)
}

// open is Open on d, or on the driver registered for the URL's scheme
// when d is nil: the URL and the common parameters checked, the driver's
// Conn opened, the degraded mode and the observer put around it.
func open(d driver.Driver, rawURL string, opts []Option) (*Store, error) {
	o := options{logger: zap.NewNop()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.timeoutSet && o.timeout <= 0 {
		return nil, openErr(driver.Invalid("timeout",
			fmt.Sprintf("WithTimeout must be positive, got %v", o.timeout)))
	}
	u, err := storeURL(rawURL)
	if err != nil {
		return nil, openErr(err)
	}
	if d == nil {
		var ok bool
		if d, ok = lookup(u.Scheme); !ok {
			return nil, openErr(fmt.Errorf("%w %q (registered: %s); forgotten import of "+
				"github.com/fleetstore/fleetstore/drivers/%s?",
				ErrUnknownScheme, u.Scheme, strings.Join(Drivers(), ", "), baseScheme(u.Scheme)))
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, openErr(driver.Invalid("url: query", "malformed: "+err.Error()))
	}
	cfg, err := commonParams(q, &o)
	if err != nil {
		return nil, openErr(err)
	}
	fromURL, err := fallbackFromURL(q)
	if err != nil {
		return nil, openErr(err)
	}
	fbCfg, err := fallbackConfig(fromURL, o.fallback)
	if err != nil {
		return nil, openErr(err)
	}
	u.RawQuery = q.Encode()
	cfg.URL = u
	conn, err := d.Open(cfg)
	if err != nil {
		return nil, openErr(err)
	}
	if conn == nil || isNilPointer(conn) {
		return nil, openErr(fmt.Errorf("driver for %q returned no Conn and no error", u.Scheme))
	}
	s := newStore(d, conn, u.Scheme, u.Redacted(), cfg.Timeout, o.logger)
	s.obs = o.observer
	if fbCfg != nil {
		if err := s.degrade(fbCfg, o.localClock); err != nil {
			_ = conn.Close()
			return nil, openErr(err)
		}
	}
	if err := s.attach(o.observer, u.Scheme); err != nil {
		_ = s.Close()
		return nil, openErr(err)
	}
	o.logger.Debug("store opened", zap.String("scheme", u.Scheme), zap.String("url", u.Redacted()),
		zap.Duration("timeout", cfg.Timeout), zap.String("key_prefix", cfg.KeyPrefix),
		zap.Bool("fallback", fbCfg != nil))
	return s, nil
}

// storeURL parses rawURL and checks what every store URL needs: a scheme,
// no #fragment, and userinfo that url.Parse reads as the user wrote it.
// Its errors are ErrInvalid and never quote the URL, which may hold a
// password.
func storeURL(rawURL string) (*url.URL, error) {
	if err := checkUserinfo(rawURL); err != nil {
		return nil, err
	}
	u, err := parseURL(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, password included: say only why.
		return nil, driver.Invalid("url", urlReason(err))
	}
	if u.Scheme == "" {
		return nil, driver.Invalid("url", "missing scheme (want e.g. memory:// or redis://host:6379)")
	}
	if u.Fragment != "" {
		return nil, driver.Invalid("url", "a store URL has no #fragment")
	}
	return u, nil
}

// commonParams takes the parameters every driver shares, timeout and
// key_prefix, out of q and returns the driver's Config with them; the
// fallback_* ones are fallbackFromURL's. WithTimeout wins over the URL's.
// Errors: ErrInvalid naming the parameter.
func commonParams(q url.Values, o *options) (driver.Config, error) {
	cfg := driver.Config{KeyPrefix: DefaultKeyPrefix, Timeout: DefaultTimeout, Logger: o.logger}
	for _, k := range []string{urlparam.Timeout, urlparam.KeyPrefix} {
		if len(q[k]) > 1 {
			return cfg, driver.Invalid("url: "+k, fmt.Sprintf("given %d times", len(q[k])))
		}
	}
	if vs, ok := q[urlparam.Timeout]; ok {
		t, err := time.ParseDuration(vs[0])
		if err != nil || t <= 0 {
			return cfg, driver.Invalid("url: timeout",
				fmt.Sprintf("want a positive Go duration such as 50ms, got %q", vs[0]))
		}
		cfg.Timeout = t
		q.Del(urlparam.Timeout)
	}
	if o.timeoutSet {
		cfg.Timeout = o.timeout
	}
	if vs, ok := q[urlparam.KeyPrefix]; ok {
		if err := checkKeyPrefix(vs[0]); err != nil {
			return cfg, err
		}
		cfg.KeyPrefix = vs[0]
		q.Del(urlparam.KeyPrefix)
	}
	return cfg, nil
}

// attach tells obs, when it is an observe.StoreObserver, of the opened
// Store (nothing for another Observer or none). Errors: ErrInvalid,
// naming the observer, when it refuses the Store.
func (s *Store) attach(obs observe.Observer, scheme string) error {
	so, ok := obs.(observe.StoreObserver)
	if !ok {
		return nil
	}
	info := observe.StoreInfo{Scheme: scheme, Fallback: s.fb != nil, Stats: s.FallbackStats}
	if err := so.Attach(info); err != nil {
		return driver.Invalid("observer", err.Error())
	}
	s.sobs = so
	return nil
}

// isNilPointer reports a typed nil pointer in an interface, which == nil
// does not see.
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

func openErr(err error) error { return fmt.Errorf("fleetstore: open: %w", err) }

// urlReason is url.Parse's complaint without any part of the URL: its
// messages quote the URL or a piece of it, which may be a password.
func urlReason(err error) string {
	ue, ok := err.(*url.Error)
	if !ok {
		return "malformed"
	}
	msg := ue.Err.Error()
	for _, r := range []struct{ has, say string }{
		{"invalid port", "malformed: invalid port after host"},
		{"invalid URL escape", "malformed: invalid %-escape (a '%' in a password is %25)"},
		{"missing protocol scheme", "malformed: missing scheme"},
		{"first path segment in URL cannot contain colon",
			"malformed: missing scheme (or a space before it)"},
		{"invalid character", "malformed: invalid character in host"},
		{"missing ']'", "malformed: missing ']' in host"},
		{"invalid control character", "malformed: control character in URL"},
	} {
		if strings.Contains(msg, r.has) {
			return r.say
		}
	}
	return "malformed"
}

// checkUserinfo refuses a URL with an '@' after its host: a user or
// password holding an unescaped '/', '?' or '#'. url.Parse ends the host
// at the first of those, so the rest of the password would become the
// path, query or fragment, and every later error that names a path, a
// parameter or a value would quote a piece of it. The message quotes
// nothing of the URL.
func checkUserinfo(raw string) error {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil
	}
	if end := strings.IndexAny(rest, "/?#"); end >= 0 && strings.Contains(rest[end:], "@") {
		return driver.Invalid("url", "'@' after the host: percent-encode a '/', '?', '#' or '%' "+
			"in the user or password (%2F, %3F, %23, %25); a parameter takes no user or password")
	}
	return nil
}

// baseScheme maps "rediss" and "redis+cluster" to the driver package name.
func baseScheme(s string) string {
	s, _, _ = strings.Cut(s, "+")
	switch s {
	case "rediss":
		return "redis"
	case "valkeys":
		return "valkey"
	case "postgresql":
		return "postgres"
	case "memcacheds":
		return "memcached"
	}
	return s
}

// checkKeyPrefix keeps the prefix free of characters that could change a
// key's meaning in any backend: no braces (Redis Cluster hash tags), no
// spaces or control characters (memcached).
func checkKeyPrefix(p string) error {
	if len(p) < 1 || len(p) > 64 {
		return driver.Invalid("url: key_prefix", fmt.Sprintf("must be 1–64 bytes, got %d", len(p)))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("_-.:/", c) >= 0
		if !ok {
			return driver.Invalid("url: key_prefix",
				fmt.Sprintf("byte %d (%q) not allowed: use letters, digits and _-.:/", i, c))
		}
	}
	return nil
}

// parseURL is url.Parse, except that the host may be a comma-separated
// list, e.g. memcached://h1:11211,h2,[::1]:11212: net/url reads everything
// after the last colon as one port. The list is kept whole in URL.Host for
// the driver to split and check.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil {
		return u, nil
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, err
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	auth := rest[:end]
	userinfo, hosts := "", auth
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		userinfo, hosts = auth[:at+1], auth[at+1:]
	}
	if !strings.Contains(hosts, ",") || strings.ContainsFunc(hosts, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune(".-_:[],", r))
	}) {
		return nil, err
	}
	u, err2 := url.Parse(scheme + "://" + userinfo + "multihost" + rest[end:])
	if err2 != nil {
		return nil, err
	}
	u.Host = hosts
	return u, nil
}
