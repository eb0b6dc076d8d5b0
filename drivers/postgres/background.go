package postgres

import (
	"context"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
)

// sweepBlocks is how many pages of each table one sweep call reads, and
// sweepCalls the most calls per tick: a tick deletes what 2 048 pages
// hold at most, then waits sweep_interval.
const (
	sweepBlocks = 256
	sweepCalls  = 8
)

// startBackground starts, after the first answered call, the sweep of
// expired rows; it stops at Close.
func (c *conn) startBackground() {
	select {
	case <-c.bg.Done():
		return
	default:
	}
	if c.sweep > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.sweepLoop()
		}()
	}
}

// sweepLoop deletes expired rows every sweep_interval, from a random page
// on (several Stores sweeping at once start apart).
func (c *conn) sweepLoop() {
	t := time.NewTicker(c.sweep)
	defer t.Stop()
	from := rand.Int64N(1 << 16)
	failing := false
	for {
		select {
		case <-c.bg.Done():
			return
		case <-t.C:
		}
		for i := 0; i < sweepCalls; i++ {
			next, err := c.sweepOnce(from)
			if err != nil {
				if !failing {
					c.log.Debug("postgres: sweep failed", zap.Error(err))
				}
				failing = true
				break
			}
			failing = false
			if next == from { // another Store holds the sweep
				break
			}
			from = next
			if from == 0 {
				break // went round once
			}
		}
	}
}

// sweepOnce runs one sweep_v2 call from page from, within the Store's
// timeout, and returns where the next starts.
func (c *conn) sweepOnce(from int64) (int64, error) {
	ctx, cancel := context.WithTimeout(c.bg, c.timeout)
	defer cancel()
	var deleted, next int64
	err := c.pool.QueryRow(ctx, c.q.sweep, from, int32(sweepBlocks)).Scan(&deleted, &next)
	return next, err
}
