// Package outbox measures the cost of queueing one commit durably in the
// degraded mode's on-disk outbox: internal/outboxlog (CRC-32C frames,
// group fsync) beside go.etcd.io/bbolt (a B+tree, one fsync per
// transaction; Batch groups concurrent transactions). An op is one commit
// on disk (fsynced) before the call returns, at 1 and 64 committers.
//
//	cd bench && go test -run '^$' -bench . -benchtime 2s ./outbox/
package outbox

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/outboxlog"
)

func record(i int) outboxlog.Record {
	return outboxlog.Record{
		Claim: driver.Claim{Tenant: "tenant-42", SourceID: "stripe",
			Key: fmt.Sprintf("evt_1NqX8b2eZvKYlo2C%08d", i), HookID: fmt.Sprintf("h-%016x", i),
			Node: "node-a", TTL: 24 * time.Hour},
		QueuedAt: time.Now(),
	}
}

// encode is a record as bbolt stores it: the same fields, length-prefixed,
// as outboxlog writes them (less the frame).
func encode(r *outboxlog.Record) []byte {
	b := binary.AppendVarint(nil, r.QueuedAt.UnixMicro())
	b = binary.AppendUvarint(b, uint64(r.Claim.TTL))
	for _, s := range []string{r.Claim.Tenant, r.Claim.SourceID, r.Claim.Key,
		r.Claim.HookID, r.Claim.Node} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// run spreads b.N ops over c goroutines and reports commits/s.
func run(b *testing.B, c int, op func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

var concurrency = []int{1, 64}

func BenchmarkOutboxlog(b *testing.B) {
	for _, c := range concurrency {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			l, _, err := outboxlog.Open(b.TempDir(), outboxlog.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			run(b, c, func(i int) error { return l.Append([]outboxlog.Record{record(i)}) })
			b.ReportMetric(float64(b.N)/float64(l.Stats().Syncs), "commits/sync")
		})
	}
}

// BenchmarkBbolt commits each record in a transaction of its own (Update)
// or in one that bbolt groups with the concurrent ones (Batch: up to
// MaxBatchSize 1 000, or MaxBatchDelay 10 ms after the first).
func BenchmarkBbolt(b *testing.B) {
	bucket := []byte("outbox")
	for _, mode := range []string{"update", "batch"} {
		for _, c := range concurrency {
			b.Run(fmt.Sprintf("%s/c=%d", mode, c), func(b *testing.B) {
				db, err := bolt.Open(filepath.Join(b.TempDir(), "outbox.db"), 0o600, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				if err := db.Update(func(tx *bolt.Tx) error {
					_, err := tx.CreateBucket(bucket)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				txn := db.Update
				if mode == "batch" {
					txn = db.Batch
				}
				run(b, c, func(i int) error {
					r := record(i)
					v := encode(&r)
					return txn(func(tx *bolt.Tx) error {
						bk := tx.Bucket(bucket)
						seq, err := bk.NextSequence()
						if err != nil {
							return err
						}
						return bk.Put(binary.BigEndian.AppendUint64(nil, seq), v)
					})
				})
			})
		}
	}
}
