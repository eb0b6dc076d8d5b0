// Package faults is fleetstore's fault suite: tests, and nothing else, that
// start real servers on loopback ports and then abuse them while a Store
// of each network driver (redis, valkey, memcached) is in use:
//
//   - kill -9 during a load run, then a restart on the same port;
//   - a pause (CLIENT PAUSE for Redis and Valkey, SIGSTOP for memcached)
//     for twice the call budget;
//   - 10 000 calls against a listener that accepts and never answers;
//   - a burst of concurrent callers much larger than the connection pool;
//   - a fleet of 3 Stores with a fallback (the degraded mode, CONTRACT §8)
//     through a kill, a black hole (SIGSTOP) and CLIENT PAUSE, the
//     replay of 10 000 commits queued through a kill, and a replayed
//     commit that meets another node's pending claim.
//
// Each test asserts counts and bounds, never speeds: every call returns a
// result or an error value within its budget + 10ms (CONTRACT T1) plus a
// scheduling slack for a loaded 2-core machine under -race (schedSlack,
// crowdSlack, or what a probe goroutine saw the machine stall); a server
// that holds calls makes them ErrTimeout, a dead one ErrTimeout or
// ErrUnavailable; the Store recovers by itself after a restart; no
// goroutine and no socket outlives Close for long (T4); the driver's
// sockets stay within its pool. The figures each test logs as FIGURE lines
// (go test -v ./faults) are bench/README.md's "The fault suite".
//
// The servers come from internal/testing/testserver; a missing binary skips the
// tests locally and fails them when CI is set. The Valkey driver runs
// against valkey-server when it is on PATH (make test installs it), else
// against redis-server (the protocol is the same).
package faults
