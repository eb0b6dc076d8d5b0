package postgres

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
// expired rows and the warm-up of the pool; both stop at Close.
func (c *conn) startBackground() {
	select {
	case <-c.bg.Done():
		return
	default:
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.warm()
	}()
	if c.sweep > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.sweepLoop()
		}()
	}
}

// warm connects the pool up to its size, each connect bounded by 5s, so
// that the first burst of calls finds connections (package doc, Cold
// start). A driver's own pool only: an application's pool is its own.
func (c *conn) warm() {
	if !c.own {
		return
	}
	ctx, cancel := context.WithTimeout(c.bg, 5*time.Second)
	defer cancel()
	n := int(c.pool.Config().MaxConns) - int(c.pool.Stat().TotalConns())
	var held []*pgxpool.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range max(n, 0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pc, err := c.pool.Acquire(ctx); err == nil {
				mu.Lock()
				held = append(held, pc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, pc := range held {
		pc.Release()
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

// sweepOnce runs one sweep_v1 call from page from, within the Store's
// timeout, and returns where the next starts.
func (c *conn) sweepOnce(from int64) (int64, error) {
	ctx, cancel := context.WithTimeout(c.bg, c.timeout)
	defer cancel()
	var deleted, next int64
	err := c.pool.QueryRow(ctx, c.q.sweep, from, int32(sweepBlocks)).Scan(&deleted, &next)
	return next, err
}
