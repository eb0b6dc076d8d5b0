package rediscore

import (
	"context"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// answered records that the server answered a call: the first answer of
// all starts the check of the server's settings, in the background.
func (c *Conn) answered() {
	if !c.checked.Load() && c.checking.CompareAndSwap(false, true) {
		c.wg.Add(1)
		go c.checkSettings()
	}
}

// checkSettings reads, off the hot path, the settings of every master that
// decide whether claims survive, and warns once per server and setting:
//
//   - maxmemory-policy other than noeviction: an evicted claim lets a
//     duplicate through, an evicted bucket forgets a limit;
//   - appendonly no: a crash or kill -9 loses every claim committed since
//     the last RDB snapshot (all of them when save is empty), and a
//     restarted server accepts those hooks again;
//   - hash-max-listpack-entries below 192 or hash-max-listpack-value below
//     64: some claim shards (up to about 140 fields of up to 64 bytes, see
//     internal/scripts' claim.lua) become hashtables, about 120 bytes per
//     claim instead of 60 (memory only: every decision is the same).
//
// It gives up for good when CONFIG is refused (managed services rename
// it), and tries again after the next answered call when the server did
// not answer or was still loading.
func (c *Conn) checkSettings() {
	defer c.wg.Done()
	defer c.checking.Store(false)
	ctx, cancel := context.WithTimeout(c.bg, c.timeout)
	defer cancel()
	servers, err := c.cl.ConfigGet(ctx, "maxmemory-policy", "appendonly", "save",
		"hash-max-listpack-entries", "hash-max-listpack-value")
	if err == nil {
		for server, cfg := range servers {
			c.warnSettings(server, cfg)
		}
	}
	if err == nil || c.cl.IsReply(err) && !strings.HasPrefix(err.Error(), "LOADING") {
		c.checked.Store(true)
		if err != nil {
			c.log.Debug("fleetstore: cannot read the server's settings",
				zap.String("url", c.display), zap.Error(err))
		}
	}
}

// The warnings of warnSettings.
const (
	warnEviction = "fleetstore: maxmemory-policy can evict keys: an evicted claim " +
		"lets a duplicate through; set maxmemory-policy noeviction"
	warnAppendOnly = "fleetstore: appendonly is off: a crash loses the claims committed " +
		"since the last snapshot, and their hooks are accepted again; set appendonly yes"
	warnListpack = "fleetstore: hash-max-listpack-entries or -value is below what claim " +
		"shards need: claims take about 120 bytes instead of 60; " +
		"set hash-max-listpack-entries 512 and hash-max-listpack-value 64"
)

func (c *Conn) warnSettings(server string, cfg map[string]string) {
	where := []zap.Field{zap.String("url", c.display), zap.String("server", server)}
	if p := cfg["maxmemory-policy"]; p != "noeviction" && p != "" {
		c.log.Warn(warnEviction, append(where, zap.String("maxmemory-policy", p))...)
	}
	if cfg["appendonly"] == "no" {
		c.log.Warn(warnAppendOnly, append(where, zap.String("save", cfg["save"]))...)
	}
	entries, value := cfg["hash-max-listpack-entries"], cfg["hash-max-listpack-value"]
	if below(entries, minListpackEntries) || below(value, minListpackValue) {
		c.log.Warn(warnListpack, append(where, zap.String("hash-max-listpack-entries", entries),
			zap.String("hash-max-listpack-value", value))...)
	}
}

// The listpack limits claim shards need (claim.lua's CAP of 120 fields,
// which unsplit shards pass by up to about 20, and PACKED bytes per value).
const (
	minListpackEntries = 192
	minListpackValue   = 64
)

// below reports whether v, a decimal setting, is below min; a setting the
// server does not have ("") or cannot be read is not.
func below(v string, min int) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n < min
}
