package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/webhook"
)

// Headers the forwarder adds to each hook it forwards, besides the
// event id's (sink.http.event_id_header).
const (
	hookIDHeader   = "Fleetstore-Hook-Id"
	tenantHeader   = "Fleetstore-Tenant"
	providerHeader = "Fleetstore-Provider"
	// overQuotaHeader names the plan's quotas a hook is over, comma-
	// separated: set only on a hook over one.
	overQuotaHeader = "Fleetstore-Over-Quota"
)

// hopHeaders are not forwarded (RFC 9110 §7.6.1), nor Host and
// Content-Length, which the forwarder's request sets.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length"}

// forwarder is the HTTP sink: Store spools the hook to a file of its own
// in dir, fsynced (then the claim is committed and the sender answered),
// and one goroutine POSTs the spooled hooks to the application in order of
// arrival, with the original body and headers and the event id in a
// header, retrying with exponential backoff until it answers 2xx; then
// the file is removed. At least once: a hook whose 2xx was lost (a crash,
// a timeout) is sent again, with the same event id. Hooks spooled and not
// forwarded at shutdown are forwarded at the next start.
type forwarder struct {
	url, dir, eventIDHeader string
	client                  *http.Client
	maxBackoff              time.Duration
	log                     *zap.Logger

	wake  chan struct{}
	depth atomic.Int64
	stop  context.CancelFunc
	done  chan struct{}
}

func openForwarder(c *httpSinkConfig, log *zap.Logger) (*forwarder, error) {
	if err := os.MkdirAll(c.SpoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("sink.http.spool_dir: %w", err)
	}
	names, err := spooled(c.SpoolDir)
	if err != nil {
		return nil, fmt.Errorf("sink.http.spool_dir: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{url: c.URL, dir: c.SpoolDir, eventIDHeader: c.EventIDHeader,
		client: &http.Client{Timeout: c.Timeout}, maxBackoff: c.MaxBackoff, log: log,
		wake: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
	f.depth.Store(int64(len(names)))
	go f.run(ctx)
	return f, nil
}

// spooled lists the spooled hooks in dir, oldest first.
func spooled(dir string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	slices.Sort(names)
	return names, err
}

func (f *forwarder) Store(_ context.Context, h *webhook.Hook) error {
	b, err := json.Marshal(newHookRecord(h))
	if err != nil {
		return err
	}
	name := filepath.Join(f.dir, spoolName(h))
	tmp := name + ".tmp"
	if err := writeSynced(tmp, b); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("sink http: spool: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("sink http: spool: %w", err)
	}
	if err := syncDir(f.dir); err != nil {
		return fmt.Errorf("sink http: spool: %w", err)
	}
	f.depth.Add(1)
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return nil
}

func writeSynced(name string, b []byte) error {
	file, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := file.Write(b); err != nil {
		file.Close()
		return err
	}
	if err := file.Sync(); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// Depth is how many hooks are spooled, not yet forwarded.
func (f *forwarder) Depth() int64 { return f.depth.Load() }

func (f *forwarder) run(ctx context.Context) {
	defer close(f.done)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, f.maxBackoff
	failing := false
	for {
		names, err := spooled(f.dir)
		if err != nil && !failing {
			failing = true
			f.log.Warn("forwarding failing", zap.Error(err), zap.Int64("spooled", f.Depth()))
		}
		for _, name := range names {
			for {
				err := f.forward(ctx, name)
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					b.Reset()
					if failing {
						failing = false
						f.log.Info("forwarding again", zap.Int64("spooled", f.Depth()))
					}
					break
				}
				if !failing {
					failing = true
					f.log.Warn("forwarding failing", zap.Error(err), zap.Int64("spooled", f.Depth()))
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(b.NextBackOff()):
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-time.After(time.Second): // a spooled file Store's wake missed
		}
	}
}

// forward POSTs one spooled hook; nil once the application answered 2xx
// and the file is removed.
func (f *forwarder) forward(ctx context.Context, name string) error {
	raw, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var r hookRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		// Not a spooled hook (written by hand, cut by a full disk):
		// set aside, not retried forever.
		_ = os.Rename(name, name+".bad")
		f.depth.Add(-1)
		f.log.Error("spooled hook unreadable, renamed .bad", zap.String("file", name))
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(r.body()))
	if err != nil {
		return err
	}
	for k, vs := range r.Header {
		if !slices.ContainsFunc(hopHeaders, func(h string) bool { return strings.EqualFold(h, k) }) {
			req.Header[k] = vs
		}
	}
	req.Header.Set(f.eventIDHeader, r.EventID)
	req.Header.Set(hookIDHeader, r.HookID)
	req.Header.Set(tenantHeader, r.Tenant)
	req.Header.Set(providerHeader, r.Provider)
	req.Header.Del(overQuotaHeader) // a sender's own is not ours
	if len(r.OverQuota) > 0 {
		req.Header.Set(overQuotaHeader, strings.Join(r.OverQuota, ","))
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the application answered %d", resp.StatusCode)
	}
	if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
		return err
	}
	f.depth.Add(-1)
	return nil
}

// Close stops forwarding: the request in flight is cancelled (it is sent
// again at the next start) and the spool stays on disk.
func (f *forwarder) Close() error {
	f.stop()
	<-f.done
	return nil
}
