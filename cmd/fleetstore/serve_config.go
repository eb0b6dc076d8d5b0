package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a quota's zone, on a host without a zone database too

	"go.yaml.in/yaml/v3"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/webhook"
)

// fileConfig is serve's config file, as written (YAML). Its fields are
// documented in examples/fleetstore.yaml. No secret is ever in it: a
// secret, or a URL with a password, is a ref ("env:NAME", "file:PATH").
type fileConfig struct {
	Listen      string                 `yaml:"listen"`
	AdminListen string                 `yaml:"admin_listen"`
	Node        string                 `yaml:"node"`
	AccessLog   string                 `yaml:"access_log"`
	Store       storeConfig            `yaml:"store"`
	Degraded    *degradedConfig        `yaml:"degraded"`
	Plans       map[string][]limitSpec `yaml:"plans"`
	Tenants     map[string]tenantSpec  `yaml:"tenants"`
	Endpoints   []endpointSpec         `yaml:"endpoints"`
	Sink        sinkConfig             `yaml:"sink"`
	Shutdown    time.Duration          `yaml:"shutdown_timeout"`
}

type storeConfig struct {
	URL string `yaml:"url"`
}

type degradedConfig struct {
	Nodes     int    `yaml:"nodes"`
	OutboxDir string `yaml:"outbox_dir"`
}

// limitSpec is one limit of a plan: n units per period with a burst, or,
// for a byte limit, bytes_per_second and burst_bytes; or a calendar quota,
// n units (or bytes) per day, week or month in a zone, with what happens
// to a delivery over it.
type limitSpec struct {
	Kind           string   `yaml:"kind"`
	N              int64    `yaml:"n"`
	Per            perSpec  `yaml:"per"`
	Burst          int64    `yaml:"burst"`
	BytesPerSecond byteSize `yaml:"bytes_per_second"`
	BurstBytes     byteSize `yaml:"burst_bytes"`
	Bytes          byteSize `yaml:"bytes"`
	Zone           string   `yaml:"zone"`
	Over           string   `yaml:"over"`
	Shadow         bool     `yaml:"shadow"`
}

// perSpec is a limit's per: a duration ("1s", "1h") for a rate limit, or
// day, week or month for a calendar quota.
type perSpec struct {
	d      time.Duration
	period calendar.Period // set for a quota
}

func (p *perSpec) UnmarshalYAML(n *yaml.Node) error {
	if period, err := calendar.ParsePeriod(n.Value); err == nil {
		p.period = period
		return nil
	}
	if err := n.Decode(&p.d); err != nil {
		return fmt.Errorf("line %d, column %d: want a duration such as 1s or 1h, or day, week or month",
			n.Line, n.Column)
	}
	return nil
}

type tenantSpec struct {
	Plan    string             `yaml:"plan"`
	Secrets map[string]secrets `yaml:"secrets"`
}

// secrets is one ref or a list of them (several while rotating).
type secrets []string

func (s *secrets) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = secrets{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*s = list
	return nil
}

type endpointSpec struct {
	Path      string        `yaml:"path"`
	Provider  string        `yaml:"provider"`
	Tenant    string        `yaml:"tenant"`
	Tolerance time.Duration `yaml:"tolerance"`
	ClaimBody bool          `yaml:"claim_body"`
	Defer     bool          `yaml:"defer"`
	MaxBody   byteSize      `yaml:"max_body"`
	PublicURL string        `yaml:"public_url"`
}

type sinkConfig struct {
	File     *fileSinkConfig     `yaml:"file"`
	Redis    *redisSinkConfig    `yaml:"redis"`
	HTTP     *httpSinkConfig     `yaml:"http"`
	Postgres *postgresSinkConfig `yaml:"postgres"`
}

type fileSinkConfig struct {
	Path     string   `yaml:"path"`
	MaxBytes byteSize `yaml:"max_bytes"`
	Keep     int      `yaml:"keep"`
}

type redisSinkConfig struct {
	URL    string `yaml:"url"`
	Stream string `yaml:"stream"`
	MaxLen int64  `yaml:"max_len"`
}

type httpSinkConfig struct {
	URL           string        `yaml:"url"`
	SpoolDir      string        `yaml:"spool_dir"`
	EventIDHeader string        `yaml:"event_id_header"`
	Timeout       time.Duration `yaml:"timeout"`
	MaxBackoff    time.Duration `yaml:"max_backoff"`
}

// postgresSinkConfig is the postgres sink's: the database of store.url
// (a URL of its own, as pgx takes it), and the table of the hooks.
type postgresSinkConfig struct {
	URL   string `yaml:"url"`
	Table string `yaml:"table"`
}

// byteSize is a count of bytes: an integer, or one with a KiB, MiB or GiB
// suffix ("64MiB").
type byteSize int64

func (b *byteSize) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimSpace(n.Value)
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, suffix)), m
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return fmt.Errorf("line %d, column %d: want a count of bytes such as 1048576 or 64MiB", n.Line, n.Column)
	}
	*b = byteSize(v * mult)
	return nil
}

// Defaults of the config file's fields.
const (
	defaultListen     = "127.0.0.1:8080"
	defaultSinkFile   = "fleetstore-hooks.jsonl"
	defaultShutdown   = 30 * time.Second
	defaultEventIDHdr = "Fleetstore-Event-Id"
	defaultHookTable  = "fleetstore_hooks"
)

// serveConfig is a config file checked and resolved: plans built, secrets
// read, providers made. It is what serve runs, and what a reload swaps.
type serveConfig struct {
	file      fileConfig
	storeURL  string // resolved: may hold a password, never shown
	sinkURL   string // the Redis or Postgres sink's, resolved likewise
	plans     map[string]fleetstore.Plan
	over      map[string]overQuota // by plan name
	tenants   map[string]tenant
	endpoints []endpoint
}

type tenant struct {
	plan    fleetstore.Plan
	over    overQuota
	secrets map[string][]string // by provider name
}

// overQuota is what a plan does over each of its quotas, by kind: what
// its over fields say (a quota not in it: webhook.QuotaDefer).
type overQuota map[fleetstore.Kind]webhook.QuotaPolicy

type endpoint struct {
	spec     endpointSpec
	provider webhook.Provider
}

// configError is a config file refused: the file, the field (a path such
// as tenants.acme.plan), the line when known, and why.
type configError struct {
	file, field string
	line        int
	why         string
}

func (e *configError) Error() string {
	var b strings.Builder
	b.WriteString(e.file)
	if e.line > 0 {
		fmt.Fprintf(&b, ":%d", e.line)
	}
	if e.field != "" {
		b.WriteString(": " + e.field)
	}
	return b.String() + ": " + e.why
}

var (
	yamlType  = regexp.MustCompile(` in type [\w.]+|main\.`)
	yamlValue = regexp.MustCompile("`[^`]*`") // a value quoted: it may be a secret pasted in
	yamlLine  = regexp.MustCompile(`^line (\d+)(?:, column (\d+))?: `)
)

// loadConfig reads, checks and resolves the config file at path. Its
// errors are *configError; none quotes a secret (a secret is never in the
// file, and what env or file refs hold is never shown).
func loadConfig(path string) (*serveConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, &configError{file: path, why: "cannot read it: " + errors.Unwrap(err).Error()}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, yamlError(path, nil, err)
	}
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty file, checked as one
		return nil, yamlError(path, &root, err)
	}
	c := &serveConfig{file: fc}
	if err := c.resolve(); err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			ce.file = path
			ce.line = lineOf(&root, ce.field)
		}
		return nil, err
	}
	return c, nil
}

// yamlError is a YAML parse or decode error as a configError: its first
// problem, with its line and, found in root when it can be, its field;
// the Go type names and the value cut.
func yamlError(path string, root *yaml.Node, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.ReplaceAll(msg, "into time.Duration", "into a duration such as 30s or 1m30s")
	msg = yamlType.ReplaceAllString(msg, "")
	msg = yamlValue.ReplaceAllString(msg, "a value")
	ce := &configError{file: path, why: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		ce.line, _ = strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		ce.why = msg[len(m[0]):]
		if root != nil {
			ce.field = fieldAt(root, "", ce.line, col)
		}
	}
	if strings.HasPrefix(ce.why, "field ") && strings.HasSuffix(ce.why, " not found") {
		ce.why = "unknown " + strings.TrimSuffix(ce.why, " not found")
		ce.field = "" // the field is in why
	}
	return ce
}

// lineOf is the line of field (a path of map keys and [i] indexes) in the
// document, or of its nearest ancestor found; 0 if none.
func lineOf(root *yaml.Node, field string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, part := range splitField(field) {
		var next *yaml.Node
		switch {
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					line, next = n.Content[i].Line, n.Content[i+1]
				}
			}
		case n.Kind == yaml.SequenceNode && strings.HasPrefix(part, "["):
			i, err := strconv.Atoi(strings.Trim(part, "[]"))
			if err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

// fieldAt is the field (a path such as plans.free[0].burst_bytes) under
// n whose value starts at line and col, or, col 0, the one key on line;
// "" if there is none, or several on line.
func fieldAt(n *yaml.Node, path string, line, col int) string {
	var found []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := strings.TrimPrefix(path+"."+k.Value, ".")
				if (col > 0 && v.Line == line && v.Column == col) || (col == 0 && k.Line == line) {
					found = append(found, p)
				}
				walk(v, p)
			}
		}
	}
	walk(n, path)
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// splitField splits "tenants.acme.secrets.github[1]" into its keys and
// indexes.
func splitField(field string) []string {
	var parts []string
	for _, p := range strings.Split(field, ".") {
		for {
			i := strings.IndexByte(p, '[')
			if i < 0 {
				break
			}
			if i > 0 {
				parts = append(parts, p[:i])
			}
			j := strings.IndexByte(p, ']')
			if j < i {
				break
			}
			parts = append(parts, p[i:j+1])
			p = p[j+1:]
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

func bad(field, why string, args ...any) error {
	return &configError{field: field, why: fmt.Sprintf(why, args...)}
}

// providers are the built-in providers by their config name.
var providers = map[string]func(s endpointSpec) webhook.Provider{
	"github":            func(endpointSpec) webhook.Provider { return webhook.GitHub() },
	"stripe":            func(s endpointSpec) webhook.Provider { return webhook.Stripe(s.Tolerance) },
	"standard-webhooks": func(s endpointSpec) webhook.Provider { return webhook.StandardWebhooks(s.Tolerance) },
	"svix":              func(s endpointSpec) webhook.Provider { return webhook.Svix(s.Tolerance) },
	"shopify":           func(endpointSpec) webhook.Provider { return webhook.Shopify() },
	"slack":             func(s endpointSpec) webhook.Provider { return webhook.Slack(s.Tolerance) },
	"discord":           func(s endpointSpec) webhook.Provider { return webhook.Discord(s.Tolerance) },
	"paddle":            func(s endpointSpec) webhook.Provider { return webhook.Paddle(s.Tolerance) },
	"linear":            func(s endpointSpec) webhook.Provider { return webhook.Linear(s.Tolerance) },
	"twilio": func(s endpointSpec) webhook.Provider {
		base := strings.TrimSuffix(s.PublicURL, "/")
		return webhook.Twilio(func(r *http.Request) string { return base + r.URL.RequestURI() })
	},
}

func providerNames() string {
	return keys(providers)
}

// resolve checks the file's fields, fills in defaults, builds the plans
// and reads the secrets. It goes in the file's order of dependence: a
// tenant names a plan and the providers of its endpoints, so plans and
// endpoints come before tenants. The first field refused is the error.
func (c *serveConfig) resolve() error {
	f := &c.file
	if f.Listen == "" {
		f.Listen = defaultListen
	}
	if f.Shutdown == 0 {
		f.Shutdown = defaultShutdown
	}
	if f.Shutdown < 0 {
		return bad("shutdown_timeout", "must not be negative")
	}
	if err := c.resolveStore(); err != nil {
		return err
	}
	if err := c.resolveSink(); err != nil {
		return err
	}
	if err := c.resolvePlans(); err != nil {
		return err
	}
	usedProviders, err := c.resolveEndpoints()
	if err != nil {
		return err
	}
	return c.resolveTenants(usedProviders)
}

// resolveStore reads store.url, which may be a ref to a URL with a
// password, and checks the degraded mode's fleet size.
func (c *serveConfig) resolveStore() error {
	f := &c.file
	if f.Store.URL == "" {
		return bad("store.url", "required: memory:// for one node, redis://host:6379/0, … (env:NAME for one with a password)")
	}
	var err error
	if c.storeURL, err = resolveURL("store.url", f.Store.URL); err != nil {
		return err
	}
	if d := f.Degraded; d != nil {
		if d.Nodes < 1 || d.Nodes > 1_000_000 {
			return bad("degraded.nodes", "must be the fleet's size, 1–1000000, got %d", d.Nodes)
		}
	}
	return nil
}

// resolvePlans builds each plan, in name order so that the error of a
// file with several bad plans is the same on every run.
func (c *serveConfig) resolvePlans() error {
	if len(c.file.Plans) == 0 {
		return bad("plans", "required: at least one plan (a plan may have no limits: [])")
	}
	c.plans, c.over = map[string]fleetstore.Plan{}, map[string]overQuota{}
	for _, name := range slices.Sorted(maps.Keys(c.file.Plans)) {
		plan, over, err := buildPlan(name, c.file.Plans[name])
		if err != nil {
			return err
		}
		c.plans[name], c.over[name] = plan, over
	}
	return nil
}

// buildPlan builds the plan name from its limits, then checks it whole
// (Plan.Check), naming the field of plans.NAME that Check found at fault.
// over holds the policy of each quota whose over is set.
func buildPlan(name string, specs []limitSpec) (plan fleetstore.Plan, over overQuota, err error) {
	plan, over = fleetstore.Plan{}, overQuota{}
	for i, s := range specs {
		field := fmt.Sprintf("plans.%s[%d]", name, i)
		l, err := s.limit(field)
		if err != nil {
			return nil, nil, err
		}
		plan = append(plan, l)
		if s.Over != "" {
			p, err := webhook.ParseQuotaPolicy(s.Over)
			if err != nil {
				return nil, nil, bad(field+".over", "want defer, refuse or drop, got %q", s.Over)
			}
			over[l.Kind()] = p
		}
	}
	if err := plan.Check(); err != nil {
		var inv *fleetstore.InvalidError
		if errors.As(err, &inv) {
			return nil, nil, bad("plans."+name+strings.TrimPrefix(inv.Field, "plan"), "%s", inv.Reason)
		}
		return nil, nil, bad("plans."+name, "%v", err)
	}
	return plan, over, nil
}

// resolveEndpoints checks each endpoint and makes its provider. It
// returns the providers used: a tenant's secret for any other provider
// is refused, as one no request could ever use.
func (c *serveConfig) resolveEndpoints() (usedProviders map[string]bool, err error) {
	if len(c.file.Endpoints) == 0 {
		return nil, bad("endpoints", "required: at least one (path, provider)")
	}
	seen := map[string]bool{}
	usedProviders = map[string]bool{}
	scratch := http.NewServeMux() // the patterns, as serve's mux takes them
	for i, e := range c.file.Endpoints {
		field := fmt.Sprintf("endpoints[%d]", i)
		if err := c.checkEndpoint(field, e, seen); err != nil {
			return nil, err
		}
		if err := handle(scratch, e.Path, http.NotFoundHandler()); err != nil {
			return nil, bad(field+".path", "%v", err)
		}
		seen[e.Path] = true
		usedProviders[e.Provider] = true
		p := providers[e.Provider](e)
		if e.Defer {
			p = webhook.Deferring(p)
		}
		c.endpoints = append(c.endpoints, endpoint{spec: e, provider: p})
	}
	return usedProviders, nil
}

// checkEndpoint checks the fields of one endpoint, field, against the
// paths seen before it and the file's tenants.
func (c *serveConfig) checkEndpoint(field string, e endpointSpec, seen map[string]bool) error {
	_, ok := providers[e.Provider]
	switch {
	case !ok:
		return bad(field+".provider", "want one of %s, got %q", providerNames(), e.Provider)
	case !strings.HasPrefix(e.Path, "/"):
		return bad(field+".path", "must start with /, got %q", e.Path)
	case seen[e.Path]:
		return bad(field+".path", "%q is another endpoint's too", e.Path)
	case strings.ContainsAny(e.Path, " \t"):
		return bad(field+".path", "a path only, no method or space: %q", e.Path)
	case e.Tenant == "" && !strings.Contains(e.Path, "{tenant}"):
		return bad(field+".path", "must name the tenant ({tenant} in the path), or the endpoint its tenant (tenant:)")
	case e.Tenant != "" && strings.Contains(e.Path, "{tenant}"):
		return bad(field+".tenant", "the path names the tenant already ({tenant})")
	case e.Tenant != "" && c.file.Tenants[e.Tenant].Plan == "":
		return bad(field+".tenant", "no tenant %q in tenants", e.Tenant)
	case e.Tolerance < 0:
		return bad(field+".tolerance", "must not be negative")
	case e.Provider == "twilio" && e.PublicURL == "":
		return bad(field+".public_url", "required for twilio: the scheme and host Twilio signs the URL with")
	case e.Provider != "twilio" && e.PublicURL != "":
		return bad(field+".public_url", "only twilio signs the URL")
	case e.Path == "/metrics" || e.Path == "/healthz" || e.Path == "/readyz":
		return bad(field+".path", "%s is serve's own", e.Path)
	}
	return nil
}

// resolveTenants gives each tenant its plan and reads its secrets, in
// name order so that the error of a file with several bad tenants is the
// same on every run.
func (c *serveConfig) resolveTenants(usedProviders map[string]bool) error {
	if len(c.file.Tenants) == 0 {
		return bad("tenants", "required: at least one tenant (plan, secrets)")
	}
	c.tenants = map[string]tenant{}
	for _, name := range slices.Sorted(maps.Keys(c.file.Tenants)) {
		t := c.file.Tenants[name]
		field := "tenants." + name
		plan, ok := c.plans[t.Plan]
		if !ok {
			return bad(field+".plan", "no plan %q (plans: %s)", t.Plan, keys(c.plans))
		}
		byProvider, err := readSecrets(field, t.Secrets, usedProviders)
		if err != nil {
			return err
		}
		c.tenants[name] = tenant{plan: plan, over: c.over[t.Plan], secrets: byProvider}
	}
	return nil
}

// readSecrets reads the secrets of one tenant, field, by provider name.
// The refs are read now, at start or reload, so that a secret missing is
// a config file refused rather than a delivery failing later.
func readSecrets(field string, refs map[string]secrets, usedProviders map[string]bool) (map[string][]string, error) {
	out := map[string][]string{}
	for _, prov := range slices.Sorted(maps.Keys(refs)) {
		if !usedProviders[prov] {
			return nil, bad(field+".secrets."+prov, "no endpoint of provider %q", prov)
		}
		for i, ref := range refs[prov] {
			s, err := readRef(fmt.Sprintf("%s.secrets.%s[%d]", field, prov, i), ref)
			if err != nil {
				return nil, err
			}
			out[prov] = append(out[prov], s)
		}
	}
	return out, nil
}

// resolveSink checks the one sink the file names, the file sink when it
// names none, and fills in its defaults.
func (c *serveConfig) resolveSink() error {
	s := &c.file.Sink
	n := 0
	for _, set := range []bool{s.File != nil, s.Redis != nil, s.HTTP != nil, s.Postgres != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return bad("sink", "one of file, redis, http, postgres, got %d", n)
	case n == 0:
		s.File = &fileSinkConfig{}
	}
	switch {
	case s.File != nil:
		if s.File.Path == "" {
			s.File.Path = defaultSinkFile
		}
		if s.File.Keep < 0 {
			return bad("sink.file.keep", "must not be negative")
		}
	case s.Redis != nil:
		return c.resolveRedisSink(s.Redis)
	case s.HTTP != nil:
		return resolveHTTPSink(s.HTTP)
	case s.Postgres != nil:
		return c.resolvePostgresSink(s.Postgres)
	}
	return nil
}

// resolveRedisSink checks the Redis sink and reads its URL, which may be
// a ref to one with a password.
func (c *serveConfig) resolveRedisSink(r *redisSinkConfig) error {
	if r.URL == "" {
		return bad("sink.redis.url", "required: redis://host:6379/0 (env:NAME for one with a password)")
	}
	if r.Stream == "" {
		return bad("sink.redis.stream", "required: the stream's key")
	}
	if r.MaxLen < 0 {
		return bad("sink.redis.max_len", "must not be negative")
	}
	var err error
	c.sinkURL, err = resolveURL("sink.redis.url", r.URL)
	return err
}

// resolveHTTPSink checks the HTTP sink and fills in its defaults. Its URL
// is the application's and is written in the file, so it may hold no
// credentials.
func resolveHTTPSink(h *httpSinkConfig) error {
	u, err := url.Parse(h.URL)
	switch {
	case h.URL == "":
		return bad("sink.http.url", "required: where the application takes hooks")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return bad("sink.http.url", "want an http:// or https:// URL")
	case u.User != nil:
		return bad("sink.http.url", "no credentials in the file")
	case h.SpoolDir == "":
		return bad("sink.http.spool_dir", "required: where hooks wait until the application takes them")
	case h.Timeout < 0 || h.MaxBackoff < 0:
		return bad("sink.http", "timeout and max_backoff must not be negative")
	}
	if h.EventIDHeader == "" {
		h.EventIDHeader = defaultEventIDHdr
	}
	if h.Timeout == 0 {
		h.Timeout = 10 * time.Second
	}
	if h.MaxBackoff == 0 {
		h.MaxBackoff = time.Minute
	}
	return nil
}

// hookTable is a table name the postgres sink takes: NAME or SCHEMA.NAME,
// each lower case, as PostgreSQL folds an unquoted name.
var hookTable = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$`)

// resolvePostgresSink checks the postgres sink's fields. The sink commits
// each hook's claim in the transaction that inserts the hook, so the
// claims must be in PostgreSQL: a store on any other driver is refused.
func (c *serveConfig) resolvePostgresSink(p *postgresSinkConfig) error {
	if !isPostgres(c.storeURL) {
		return bad("sink.postgres", "needs store.url on postgres://: the sink commits each hook's claim "+
			"in the transaction that inserts the hook, and the claims are in the store")
	}
	if p.URL == "" {
		return bad("sink.postgres.url", "required: the database of store.url, "+
			"postgres://user@host:5432/db (env:NAME for one with a password)")
	}
	if p.Table == "" {
		p.Table = defaultHookTable
	}
	if !hookTable.MatchString(p.Table) {
		return bad("sink.postgres.table", "want NAME or SCHEMA.NAME, each [a-z_][a-z0-9_]{0,62}, got %q", p.Table)
	}
	var err error
	if c.sinkURL, err = resolveURL("sink.postgres.url", p.URL); err != nil {
		return err
	}
	if !isPostgres(c.sinkURL) {
		return bad("sink.postgres.url", "want a postgres:// or postgresql:// URL")
	}
	return nil
}

// isPostgres reports whether rawURL is a postgres:// or postgresql:// URL.
func isPostgres(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql")
}

// limit builds one plan limit.
func (s limitSpec) limit(field string) (fleetstore.Limit, error) {
	bytesLimit := s.BytesPerSecond != 0 || s.BurstBytes != 0
	var (
		l   fleetstore.Limit
		err error
	)
	switch {
	case s.Kind == "":
		return l, bad(field+".kind", "required: the bucket's kind (hooks, bytes, …)")
	case s.Per.period != 0:
		return s.quota(field)
	case s.Zone != "":
		return l, bad(field+".zone", "only a quota (per: day, week or month) has a zone")
	case s.Over != "":
		return l, bad(field+".over", "only a quota (per: day, week or month) has one")
	case s.Bytes != 0:
		return l, bad(field+".bytes", "only a quota (per: day, week or month) has one: "+
			"a byte limit is bytes_per_second and burst_bytes")
	case bytesLimit && (s.N != 0 || s.Burst != 0 || s.Per.d != 0):
		return l, bad(field, "either n, per and burst, or bytes_per_second and burst_bytes")
	case bytesLimit:
		l, err = fleetstore.NewByteLimit(fleetstore.Kind(s.Kind), int64(s.BytesPerSecond), int64(s.BurstBytes))
	default:
		per := s.Per.d
		if per == 0 {
			per = time.Second
		}
		l, err = fleetstore.NewLimit(fleetstore.Kind(s.Kind), s.N, per, s.Burst)
	}
	if err != nil {
		var inv *fleetstore.InvalidError
		if errors.As(err, &inv) {
			sub := inv.Field
			if sub == "period" {
				sub = "per"
			}
			return l, bad(field+"."+sub, "%s", inv.Reason)
		}
		return l, bad(field, "%v", err)
	}
	if s.Shadow {
		l = l.Shadow()
	}
	return l, nil
}

// quota builds a plan's calendar quota: n units, or bytes, per day, week
// or month in zone (UTC when unset).
func (s limitSpec) quota(field string) (fleetstore.Limit, error) {
	var l fleetstore.Limit
	switch {
	case s.Burst != 0:
		return l, bad(field+".burst", "a quota (per: %v) has none: its n is all there is", s.Per.period)
	case s.BytesPerSecond != 0 || s.BurstBytes != 0:
		return l, bad(field, "a quota (per: %v) is n or bytes, not bytes_per_second and burst_bytes",
			s.Per.period)
	case s.N != 0 && s.Bytes != 0:
		return l, bad(field, "a quota is either n or bytes")
	case s.N == 0 && s.Bytes == 0:
		// Neither set, or either set to 0: the file cannot tell which.
		return l, bad(field, "a quota needs n or bytes, at least 1")
	case s.Shadow && s.Over != "":
		return l, bad(field+".over", "a shadow quota denies nothing: nothing is over it")
	}
	loc := time.UTC
	if s.Zone != "" {
		var err error
		if loc, err = time.LoadLocation(s.Zone); err != nil || s.Zone == "Local" {
			return l, bad(field+".zone", "want an IANA time zone such as Europe/Berlin or UTC, got %q", s.Zone)
		}
	}
	kind := fleetstore.Kind(s.Kind)
	var err error
	if s.Bytes != 0 {
		l, err = fleetstore.NewByteQuota(kind, int64(s.Bytes), s.Per.period, loc)
	} else {
		l, err = fleetstore.NewQuota(kind, s.N, s.Per.period, loc)
	}
	if err != nil {
		var inv *fleetstore.InvalidError
		if errors.As(err, &inv) {
			return l, bad(field+"."+inv.Field, "%s", inv.Reason)
		}
		return l, bad(field, "%v", err)
	}
	if s.Shadow {
		l = l.Shadow()
	}
	return l, nil
}

// resolveURL reads a URL field: a URL, which must hold no password, or a
// ref (env:NAME, file:PATH) to one that may.
func resolveURL(field, v string) (string, error) {
	if strings.HasPrefix(v, "env:") || strings.HasPrefix(v, "file:") {
		return readRef(field, v)
	}
	if u, err := url.Parse(v); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return "", bad(field, "a password in the file: give the URL as env:NAME or file:PATH")
		}
	}
	return v, nil
}

// readRef reads a secret: env:NAME, the environment variable NAME;
// file:PATH, the file's content without its trailing newline. Anything
// else is refused without being quoted (it may be a secret pasted in).
func readRef(field, ref string) (string, error) {
	kind, name, _ := strings.Cut(ref, ":")
	var v string
	switch kind {
	case "env":
		s, ok := os.LookupEnv(name)
		if !ok || name == "" {
			return "", bad(field, "the environment variable %q is not set", name)
		}
		v = s
	case "file":
		b, err := os.ReadFile(name)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", bad(field, "cannot read %s: %v", name, err)
		}
		v = strings.TrimRight(string(b), "\r\n")
	default:
		return "", bad(field, "want env:NAME or file:PATH (no secret is written in the file)")
	}
	if v == "" {
		return "", bad(field, "%s is empty", ref)
	}
	return v, nil
}

func keys[V any](m map[string]V) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
