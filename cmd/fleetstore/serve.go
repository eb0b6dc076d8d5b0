package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/fleetotel"
	"github.com/fleetstore/fleetstore/internal/urlparam"
	"github.com/fleetstore/fleetstore/webhook"
)

const serveUsage = `usage: fleetstore serve [-config FILE] [-check]

Runs the webhook receiver the config file describes (YAML; see
examples/fleetstore.yaml): its endpoints, and /metrics (Prometheus),
/healthz and /readyz. A bad config file is refused at start, naming the
file, the field and why (exit status 2). SIGHUP reloads the file's
tenants, plans and endpoints (secrets read again) without dropping a
request; a file refused then is logged and the running config kept.
SIGTERM or Ctrl-C: the listener closes, deliveries in flight finish,
the sink and the store close (exit status 0).

One JSON line per delivery goes to the access log (access_log: stdout by
default), serve's own log lines to stderr. The line's hit, sink, settle
and total are durations in seconds.

flags:
`

// runServe runs the serve command until ctx is done.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "fleetstore.yaml", "the config file")
	checkOnly := fs.Bool("check", false, "check the config file, print ok and exit")
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, serveUsage, fs)
		return exitOK
	}
	if err == nil && len(positional) > 0 {
		err = fmt.Errorf("takes no arguments, got %d (the config file is -config FILE)", len(positional))
	}
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore serve: %v\n", err)
		return exitUsage
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore serve: %v\n", err)
		return exitUsage
	}
	if *checkOnly {
		if err := checkStoreURL(cfg.storeURL); err != nil {
			fmt.Fprintf(stderr, "fleetstore serve: %s: store.url: %v\n", *configPath, err)
			return exitUsage
		}
		fmt.Fprintf(stdout, "%s: ok\n", *configPath)
		return exitOK
	}
	s, err := startServer(cfg, *configPath, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore serve: %v\n", err)
		if errors.Is(err, fleetstore.ErrInvalid) || errors.Is(err, fleetstore.ErrUnknownScheme) {
			return exitUsage // the file's URL, refused by Open before any I/O
		}
		return exitUnreachable
	}
	return s.run(ctx)
}

// checkStoreURL is Open's check of the store URL, which does no I/O. The
// URL's outbox directory is left out: a running node holds its lock.
func checkStoreURL(raw string) error {
	if u, err := url.Parse(raw); err == nil {
		if q, err := url.ParseQuery(u.RawQuery); err == nil && q.Has(urlparam.FallbackOutboxDir) {
			q.Del(urlparam.FallbackOutboxDir)
			u.RawQuery = q.Encode()
			raw = u.String()
		}
	}
	store, err := fleetstore.Open(raw)
	if err != nil {
		return err
	}
	return store.Close()
}

// server is a running serve: its store, sink, metrics, and the endpoints
// of the config file now in force (swapped by a reload).
type server struct {
	path     string
	cfg      atomic.Pointer[serveConfig]
	mux      atomic.Pointer[http.ServeMux]
	store    *fleetstore.Store
	sink     sink
	spool    *forwarder // the HTTP sink, else nil
	obs      *fleetotel.Observer
	mp       *sdkmetric.MeterProvider
	reg      *prometheus.Registry
	log      *zap.Logger
	access   *zap.Logger
	draining atomic.Bool
	reloads  *prometheus.CounterVec

	servers []*http.Server
	errs    chan error
}

// startServer opens what serve runs on, in order: the logs, the metrics,
// the store, the sink, the endpoints, then the listeners. An error names
// the config field at fault and closes the store and the sink already
// open: a start refused leaves the outbox directory unlocked.
func startServer(cfg *serveConfig, path string, stdout, stderr io.Writer) (_ *server, err error) {
	s := &server{path: path, errs: make(chan error, 2)}
	s.log = jsonLogger(stderr)
	access, err := accessWriter(cfg.file.AccessLog, stdout, stderr)
	if err != nil {
		return nil, fmt.Errorf("%s: access_log: %w", path, err)
	}
	s.access = jsonLogger(access)
	if err = s.openMetrics(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err = s.openStore(cfg); err != nil {
		return nil, fmt.Errorf("%s: store.url: %w", path, err)
	}
	defer func() {
		if err != nil {
			s.store.Close()
		}
	}()
	if err = s.openSink(cfg); err != nil {
		return nil, fmt.Errorf("%s: sink: %w", path, err)
	}
	defer func() {
		if err != nil {
			s.sink.Close()
		}
	}()
	mux, err := s.endpoints(cfg)
	if err != nil {
		return nil, err
	}
	s.cfg.Store(cfg)
	s.mux.Store(mux)
	if err = s.listen(s.listeners(&cfg.file)); err != nil {
		return nil, err
	}
	return s, nil
}

// openMetrics builds the Prometheus registry /metrics serves. The store's
// and the deliveries' metrics come from fleetotel through an OpenTelemetry
// exporter; the Go runtime's and the reload counter are registered on it
// directly.
func (s *server) openMetrics() error {
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(s.reg))
	if err != nil {
		return err
	}
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	if s.obs, err = fleetotel.New(fleetotel.WithMeterProvider(s.mp)); err != nil {
		return err
	}
	s.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetstore_serve_reloads_total",
		Help: "Config reloads (SIGHUP), by result: ok or refused."}, []string{"result"})
	s.reg.MustRegister(s.reloads)
	return nil
}

// openStore opens the store of cfg, with the degraded mode when the file
// asks for it: a replayed commit that meets another hook's claim goes to
// the access log (conflict).
func (s *server) openStore(cfg *serveConfig) (err error) {
	opts := []fleetstore.Option{fleetstore.WithLogger(s.log), fleetstore.WithObserver(s.obs)}
	if d := cfg.file.Degraded; d != nil {
		opts = append(opts, fleetstore.WithFallback(fleetstore.Fallback{Nodes: d.Nodes, OutboxDir: d.OutboxDir,
			OnConflict: s.conflict}))
	}
	s.store, err = fleetstore.Open(cfg.storeURL, opts...)
	return err
}

// openSink opens the one sink the file names (resolve made sure there is
// one). The HTTP sink also keeps s.spool, whose depth /readyz and a gauge
// show: hooks the application has not taken yet.
func (s *server) openSink(cfg *serveConfig) (err error) {
	switch sc := cfg.file.Sink; {
	case sc.Redis != nil:
		s.sink, err = openRedisSink(sc.Redis, cfg.sinkURL)
	case sc.Postgres != nil:
		s.sink, err = openPostgresSink(sc.Postgres, cfg.sinkURL, cfg.storeURL, cfg.file.Node)
	case sc.HTTP != nil:
		s.spool, err = openForwarder(sc.HTTP, s.log)
		s.sink = s.spool
		if err == nil {
			s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetstore_serve_spool_hooks",
				Help: "Hooks spooled by the HTTP sink, not yet taken by the application."},
				func() float64 { return float64(s.spool.Depth()) }))
		}
	default:
		s.sink, err = openFileSink(sc.File)
	}
	return err
}

// listener is one address serve listens on, named by its config field.
type listener struct {
	field, addr string
	h           http.Handler
}

// listeners are the endpoints' listener and the admin one (/metrics,
// /healthz, /readyz). Without admin_listen, the admin paths share the
// endpoints' listener. The endpoints' handler loads the mux on each
// request, so that a reload's endpoints serve the next request.
func (s *server) listeners(f *fileConfig) []listener {
	admin := http.NewServeMux()
	admin.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	admin.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	admin.HandleFunc("GET /readyz", s.readyz)
	hooks := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mux.Load().ServeHTTP(w, r)
	}))
	if f.AdminListen != "" {
		return []listener{{"listen", f.Listen, hooks}, {"admin_listen", f.AdminListen, admin}}
	}
	whole := http.NewServeMux()
	whole.Handle("/metrics", admin)
	whole.Handle("/healthz", admin)
	whole.Handle("/readyz", admin)
	whole.Handle("/", hooks)
	return []listener{{"listen", f.Listen, whole}}
}

// listen binds each listener and serves it. An address in use is an
// error at start naming its field, not a log line later; it closes the
// servers already started. A server that fails while serving sends its
// error to s.errs, which ends run.
func (s *server) listen(ls []listener) error {
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			for _, srv := range s.servers {
				srv.Close()
			}
			return fmt.Errorf("%s: %s: %w", s.path, l.field, err)
		}
		srv := &http.Server{Handler: l.h, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: zap.NewStdLog(s.log)}
		s.servers = append(s.servers, srv)
		s.log.Info("listening", zap.String("field", l.field), zap.String("addr", ln.Addr().String()))
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				s.errs <- err
			}
		}()
	}
	return nil
}

// run serves until ctx is done, reloading the config file on SIGHUP, then
// shuts down gracefully.
func (s *server) run(ctx context.Context) int {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	code := exitOK
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			s.reload()
		case err := <-s.errs:
			s.log.Error("serving failed", zap.Error(err))
			code = exitFail
			break loop
		}
	}
	s.shutdown()
	return code
}

// shutdown stops taking deliveries, lets the ones in flight finish
// (within shutdown_timeout), then closes the sink and the store: commits
// not replayed stay in the outbox directory, if any.
func (s *server) shutdown() {
	s.draining.Store(true)
	s.log.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Load().file.Shutdown)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil {
			s.log.Warn("deliveries still in flight at shutdown_timeout", zap.Error(err))
			srv.Close()
		}
	}
	if err := s.sink.Close(); err != nil {
		s.log.Warn("sink close failed", zap.Error(err))
	}
	st := s.store.FallbackStats()
	if err := s.store.Close(); err != nil {
		s.log.Warn("store close failed", zap.Error(err))
	}
	_ = s.mp.Shutdown(context.Background())
	s.log.Info("stopped", zap.Int("outbox", st.Outbox))
}

// reload reads the config file again and swaps in its endpoints,
// tenants, plans and secrets. A request in flight finishes on the
// handlers it started on. A file refused, or one changing a field that
// needs a restart, is logged and the running config kept.
func (s *server) reload() {
	cur := s.cfg.Load()
	next, err := loadConfig(s.path)
	if err == nil {
		field := restartField(&cur.file, &next.file)
		switch {
		case field != "":
		case cur.storeURL != next.storeURL: // a file: ref whose content changed
			field = "store.url"
		case cur.sinkURL != next.sinkURL && next.file.Sink.Postgres != nil:
			field = "sink.postgres.url"
		case cur.sinkURL != next.sinkURL:
			field = "sink.redis.url"
		}
		if field != "" {
			err = &configError{file: s.path, field: field, why: "changed: it needs a restart"}
		}
	}
	var mux *http.ServeMux
	if err == nil {
		mux, err = s.endpoints(next)
	}
	if err != nil {
		s.reloads.WithLabelValues("refused").Inc()
		s.log.Error("config reload refused; the running config is kept", zap.Error(err))
		return
	}
	s.cfg.Store(next)
	s.mux.Store(mux)
	s.reloads.WithLabelValues("ok").Inc()
	s.log.Info("config reloaded", zap.String("config", s.path), zap.Int("tenants", len(next.tenants)),
		zap.Int("endpoints", len(next.endpoints)))
}

// restartField names the first field of next that differs from cur and
// that a reload cannot change; "" if none.
func restartField(cur, next *fileConfig) string {
	for _, f := range []struct {
		name      string
		cur, next any
	}{
		{"listen", cur.Listen, next.Listen}, {"admin_listen", cur.AdminListen, next.AdminListen},
		{"node", cur.Node, next.Node}, {"access_log", cur.AccessLog, next.AccessLog},
		{"store", cur.Store, next.Store}, {"degraded", cur.Degraded, next.Degraded},
		{"sink", cur.Sink, next.Sink},
	} {
		if !reflect.DeepEqual(f.cur, f.next) {
			return f.name
		}
	}
	return ""
}

// endpoints builds the mux of cfg's endpoints: one webhook.Handler each.
func (s *server) endpoints(cfg *serveConfig) (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	for i, ep := range cfg.endpoints {
		h, err := s.handler(cfg, ep)
		if err != nil {
			return nil, &configError{file: s.path, field: fmt.Sprintf("endpoints[%d]", i), why: err.Error()}
		}
		if err := handle(mux, ep.spec.Path, h); err != nil {
			return nil, &configError{file: s.path, field: fmt.Sprintf("endpoints[%d].path", i), why: err.Error()}
		}
	}
	return mux, nil
}

// handle is mux.Handle, its panic on a bad or conflicting pattern an error.
func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

func (s *server) handler(cfg *serveConfig, ep endpoint) (*webhook.Handler, error) {
	name := ep.spec.Provider
	tenantOf := func(r *http.Request, _ []byte) (string, error) { return r.PathValue("tenant"), nil }
	if fixed := ep.spec.Tenant; fixed != "" {
		tenantOf = func(*http.Request, []byte) (string, error) { return fixed, nil }
	}
	return webhook.New(webhook.Config{
		Store:    s.store,
		Provider: ep.provider,
		Secrets: func(t string) ([]string, error) {
			secrets := cfg.tenants[t].secrets[name]
			if len(secrets) == 0 {
				return nil, webhook.ErrUnknownTenant // no such tenant, or none of this provider's
			}
			return secrets, nil
		},
		Tenant:     tenantOf,
		Sink:       endpointSink(s.sink, ep.spec),
		Plan:       func(t string) fleetstore.Plan { return cfg.tenants[t].plan },
		OverQuota:  func(t string, k fleetstore.Kind) webhook.QuotaPolicy { return cfg.tenants[t].over[k] },
		OnDelivery: s.delivered,
		MaxBody:    int64(ep.spec.MaxBody),
		ClaimBody:  ep.spec.ClaimBody,
		TTL:        claimTTL,
		Node:       cfg.file.Node,
		Logger:     s.log,
	})
}

// delivered counts a delivery (fleetotel) and writes its access-log line.
func (s *server) delivered(d *webhook.Delivery) {
	s.obs.ObserveDelivery(d)
	s.access.Info("delivery", zap.Inline(d)) // the keys webhook.Delivery's doc lists
}

// conflict writes a replayed commit that met another hook's committed
// claim to the access log: an event the outage let in twice, stored by
// both hooks, for the application to reconcile.
func (s *server) conflict(c fleetstore.Conflict) {
	s.access.Warn("conflict", zap.String("provider", c.Claim.SourceID), zap.String("tenant", c.Claim.Tenant),
		zap.String("event_id", c.Claim.Key), zap.String("hook_id", c.Claim.HookID),
		zap.String("holder", c.Holder), zap.Time("queued_at", c.QueuedAt))
}

// readiness is /readyz's body.
type readiness struct {
	Ready    bool   `json:"ready"`
	Degraded bool   `json:"degraded"`
	Outbox   int    `json:"outbox"`
	Outages  uint64 `json:"outages"`
	Spool    int64  `json:"spool,omitempty"`
}

// readyz answers 200 while serve takes deliveries, degraded or not (a
// degraded node still decides them, at its share of every limit), and
// 503 once it is shutting down.
func (s *server) readyz(w http.ResponseWriter, _ *http.Request) {
	st := s.store.FallbackStats()
	r := readiness{Ready: !s.draining.Load(), Degraded: st.Degraded, Outbox: st.Outbox, Outages: st.Outages}
	if s.spool != nil {
		r.Spool = s.spool.Depth()
	}
	w.Header().Set("Content-Type", "application/json")
	if !r.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(r)
}

// jsonLogger is a zap logger writing JSON lines to w at info level.
func jsonLogger(w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zap.InfoLevel))
}

// accessWriter is where the access log goes: stdout (""), stderr, off,
// or a file appended to.
func accessWriter(v string, stdout, stderr io.Writer) (io.Writer, error) {
	switch v {
	case "", "stdout":
		return stdout, nil
	case "stderr":
		return stderr, nil
	case "off":
		return io.Discard, nil
	}
	return os.OpenFile(v, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
}
