package rediscore

import (
	"context"
	"strings"

	"go.uber.org/zap"
)

// answered records that the server answered a call: the first answer of
// all starts the eviction policy check, in the background.
func (c *Conn) answered() {
	if !c.checked.Load() && c.checking.CompareAndSwap(false, true) {
		c.wg.Add(1)
		go c.checkEviction()
	}
}

// checkEviction reads maxmemory-policy from every master, off the hot
// path, and warns once per server when it can evict keys: an evicted claim
// lets a duplicate through, an evicted bucket forgets a limit. It gives up
// for good when CONFIG is refused (managed services rename it), and tries
// again after the next answered call when the server did not answer or
// was still loading.
func (c *Conn) checkEviction() {
	defer c.wg.Done()
	defer c.checking.Store(false)
	ctx, cancel := context.WithTimeout(c.bg, c.timeout)
	defer cancel()
	policies, err := c.cl.ConfigGet(ctx, "maxmemory-policy")
	if err == nil {
		for server, policy := range policies {
			switch policy {
			case "noeviction":
			case "":
				c.log.Debug("fleetstore: cannot read maxmemory-policy", zap.String("url", c.display),
					zap.String("server", server), zap.Error(errNoPolicy))
			default:
				c.log.Warn("fleetstore: maxmemory-policy can evict keys: an evicted claim lets a duplicate through; set maxmemory-policy noeviction",
					zap.String("url", c.display), zap.String("server", server), zap.String("maxmemory-policy", policy))
			}
		}
	}
	if err == nil || c.cl.IsReply(err) && !strings.HasPrefix(err.Error(), "LOADING") {
		c.checked.Store(true)
		if err != nil {
			c.log.Debug("fleetstore: cannot read maxmemory-policy", zap.String("url", c.display), zap.Error(err))
		}
	}
}
