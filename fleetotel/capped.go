package fleetotel

import (
	"maps"
	"sync"
	"sync/atomic"
)

// capped is a map of at most a given number of values, each made once on
// first use, read without a lock or an allocation, copied on write under
// mu. It bounds an attribute whose values the application chooses (a
// bucket kind, a provider's name): past the bound a key gets the caller's
// "_OTHER" value and is not kept.
type capped[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

// get returns k's value: the one kept, else one made by build while fewer
// than limit are kept, else other.
func (c *capped[K, V]) get(k K, limit int, other V, build func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	return c.add(k, limit, other, build)
}

func (c *capped[K, V]) add(k K, limit int, other V, build func() V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if v, ok := old[k]; ok {
		return v
	}
	if len(old) >= limit {
		return other
	}
	v := build()
	m := maps.Clone(old)
	if m == nil {
		m = map[K]V{}
	}
	m[k] = v
	c.m.Store(&m)
	return v
}
