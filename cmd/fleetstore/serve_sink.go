package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// sink is a webhook.Sink that serve closes at shutdown.
type sink interface {
	webhook.Sink
	// Close stops the sink: a hook stored before it stays stored (a
	// spooled one is forwarded at the next start).
	Close() error
}

// hookRecord is a hook as the sinks write it: one JSON object (a line of the
// file sink, a spooled hook of the HTTP forwarder).
type hookRecord struct {
	HookID   string    `json:"hook_id"`
	Tenant   string    `json:"tenant"`
	Provider string    `json:"provider"`
	EventID  string    `json:"event_id"`
	Received time.Time `json:"received"`
	Deferred bool      `json:"deferred,omitempty"`
	// OverQuota names the plan's quotas the hook is over, to bill
	// (webhook.Hook.OverQuota).
	OverQuota []string    `json:"over_quota,omitempty"`
	Local     bool        `json:"local,omitempty"`
	Header    http.Header `json:"header"`
	// Body is the body as a string when it is UTF-8 (a JSON string keeps
	// its bytes exactly), else BodyBase64.
	Body       string `json:"body,omitempty"`
	BodyBase64 []byte `json:"body_base64,omitempty"`
}

func newHookRecord(h *webhook.Hook) hookRecord {
	r := hookRecord{HookID: h.ID, Tenant: h.Tenant, Provider: h.Source, EventID: h.EventID,
		Received: h.Received.UTC(), Deferred: h.Deferred, Local: h.Local, Header: h.Header}
	for _, k := range h.OverQuota {
		r.OverQuota = append(r.OverQuota, string(k))
	}
	if utf8.Valid(h.Body) {
		r.Body = string(h.Body)
	} else {
		r.BodyBase64 = h.Body
	}
	return r
}

func (r *hookRecord) body() []byte {
	if r.BodyBase64 != nil {
		return r.BodyBase64
	}
	return []byte(r.Body)
}

// fileSink appends one JSON line per hook to a file, fsynced before Store
// returns; past maxBytes the file is renamed PATH.TIMESTAMP and a new one
// begun, and only the keep newest renamed files are kept (0: all).
type fileSink struct {
	path     string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	f    *os.File
	size int64
	err  error // a failed write or fsync: the file is reopened on the next Store
}

func openFileSink(c *fileSinkConfig) (*fileSink, error) {
	s := &fileSink{path: c.Path, maxBytes: int64(c.MaxBytes), keep: c.Keep}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *fileSink) open() error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.size, s.err = f, st.Size(), nil
	return nil
}

func (s *fileSink) Store(_ context.Context, h *webhook.Hook) error {
	line, err := json.Marshal(newHookRecord(h))
	if err != nil {
		return err
	}
	line = append(line, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil || s.err != nil {
		if s.f != nil {
			s.f.Close()
			s.f = nil
		}
		if err := s.open(); err != nil {
			return fmt.Errorf("sink file: %w", err)
		}
	}
	if s.maxBytes > 0 && s.size > 0 && s.size+int64(len(line)) > s.maxBytes {
		if err := s.rotate(); err != nil {
			return fmt.Errorf("sink file: rotate: %w", err)
		}
	}
	n, err := s.f.Write(line)
	s.size += int64(n)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// A line cut short is left behind: the reader skips a line that
		// is not JSON. The file is reopened on the next Store.
		s.err = err
		return fmt.Errorf("sink file: %w", err)
	}
	return nil
}

// rotate renames the file PATH.TIMESTAMP, opens a new one, fsyncs the
// directory and removes the oldest renamed files past keep.
func (s *fileSink) rotate() error {
	if err := s.f.Close(); err != nil {
		return err
	}
	s.f = nil
	old := s.path + "." + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(s.path, old); err != nil {
		return err
	}
	if err := s.open(); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		return err
	}
	if s.keep > 0 {
		rotated, _ := filepath.Glob(s.path + ".*")
		slices.Sort(rotated) // the timestamps sort in time order
		for _, f := range rotated[:max(0, len(rotated)-s.keep)] {
			_ = os.Remove(f)
		}
	}
	return nil
}

func (s *fileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// redisSink adds each hook to a Redis stream (XADD), trimmed to about
// maxLen entries when set.
type redisSink struct {
	rdb    *goredis.Client
	stream string
	maxLen int64
}

func openRedisSink(c *redisSinkConfig, rawURL string) (*redisSink, error) {
	opt, err := goredis.ParseURL(rawURL)
	if err != nil {
		// go-redis's error may quote the URL: it is not shown.
		return nil, errors.New("sink.redis.url: not a redis:// or rediss:// URL")
	}
	return &redisSink{rdb: goredis.NewClient(opt), stream: c.Stream, maxLen: c.MaxLen}, nil
}

func (s *redisSink) Store(ctx context.Context, h *webhook.Hook) error {
	header, err := json.Marshal(h.Header)
	if err != nil {
		return err
	}
	deferred, local := "0", "0"
	if h.Deferred {
		deferred = "1"
	}
	if h.Local {
		local = "1"
	}
	args := &goredis.XAddArgs{Stream: s.stream, MaxLen: s.maxLen, Approx: s.maxLen > 0,
		Values: []any{"hook_id", h.ID, "tenant", h.Tenant, "provider", h.Source,
			"event_id", h.EventID, "received", h.Received.UTC().Format(time.RFC3339Nano),
			"deferred", deferred, "local", local, "header", header, "body", h.Body}}
	if len(h.OverQuota) > 0 {
		args.Values = append(args.Values.([]any), "over_quota", overQuotaList(h.OverQuota))
	}
	if err := s.rdb.XAdd(ctx, args).Err(); err != nil {
		return fmt.Errorf("sink redis: XADD: %w", err)
	}
	return nil
}

func (s *redisSink) Close() error { return s.rdb.Close() }

// spoolName is the spooled file of a hook: its arrival, for the order of
// forwarding, and its hook id (hex, or any id made safe as a name).
func spoolName(h *webhook.Hook) string {
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, h.ID)
	return fmt.Sprintf("%020d-%s.json", h.Received.UnixNano(), id[:min(len(id), 64)])
}

// overQuotaList is the kinds of the quotas a hook is over, comma-separated
// (a kind is [a-z][a-z0-9_]*).
func overQuotaList(kinds []fleetstore.Kind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}
