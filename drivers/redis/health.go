package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
)

// health tracks whether the eviction policy has been checked.
type health struct {
	checked  atomic.Bool // maxmemory-policy known (or not knowable)
	checking atomic.Bool // a check is running
}

// failed classifies err, a call's failure, for the Store: ErrTimeout when
// the budget ran out, the caller's cancellation as is, ErrUnavailable for
// everything else (refused, unreachable, closed, an error reply). When the
// server did not answer at all, the first such failure logs that the store
// is unreachable.
func (c *conn) failed(ctx context.Context, err error) error {
	var reply goredis.Error
	answered := errors.As(err, &reply)
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled:
		return err // the caller gave up: says nothing about the store
	case !answered && (errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout() || errors.Is(err, goredis.ErrPoolTimeout) || pastDeadline(ctx)):
		// ErrPoolTimeout: go-redis waits for a pool connection on a timer
		// of its own (pool_timeout = the budget) beside ctx.Done(), and may
		// wake on the timer while ctx.Err() is still nil.
		err = fmt.Errorf("%w: %w", driver.ErrTimeout, err)
	default:
		err = fmt.Errorf("%w: %w", driver.ErrUnavailable, err)
	}
	if answered {
		c.answered()
	} else {
		c.reach.Down(err)
	}
	return err
}

// answered records that the server answered a call: the first answer
// after an outage is logged (reach), and the first answer of all starts
// the eviction policy check.
func (c *conn) answered() {
	c.reach.Up()
	if !c.health.checked.Load() && c.health.checking.CompareAndSwap(false, true) {
		c.wg.Add(1)
		go c.checkEviction()
	}
}

// checkEviction reads maxmemory-policy from every master, off the hot
// path, and warns when it can evict keys: an evicted claim lets a
// duplicate through, an evicted bucket forgets a limit. It gives up for
// good when CONFIG is refused (managed services rename it), and tries
// again after the next answered call when the server did not answer.
func (c *conn) checkEviction() {
	defer c.wg.Done()
	defer c.health.checking.Store(false)
	ctx, cancel := context.WithTimeout(c.bg, c.timeout)
	defer cancel()
	check := func(ctx context.Context, node *goredis.Client) error {
		cfg, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return err
		}
		policy, ok := cfg["maxmemory-policy"]
		if !ok {
			return errors.New("no maxmemory-policy in CONFIG GET reply")
		}
		if policy != "noeviction" {
			c.log.Warn("fleetstore: redis maxmemory-policy can evict keys: an evicted claim lets a duplicate through; set maxmemory-policy noeviction",
				zap.String("url", c.display), zap.String("server", node.Options().Addr), zap.String("maxmemory-policy", policy))
		}
		return nil
	}
	var err error
	if cc, ok := c.client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, check)
	} else {
		err = check(ctx, c.client.(*goredis.Client))
	}
	var reply goredis.Error
	if err == nil || errors.As(err, &reply) && !strings.HasPrefix(err.Error(), "LOADING") {
		c.health.checked.Store(true)
		if err != nil {
			c.log.Debug("fleetstore: cannot read redis maxmemory-policy", zap.String("url", c.display), zap.Error(err))
		}
	}
}

// pastDeadline reports whether ctx's deadline has passed, before its own
// timer has cancelled it.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
