package outboxlog

import (
	"testing"
)

// BenchmarkOpen10000 opens a log that holds 10 000 queued commits (and
// 10 000 acknowledged ones): the read a node makes before its Store
// decides shared. records/s counts the queued ones returned.
func BenchmarkOpen10000(b *testing.B) {
	dir := b.TempDir()
	l, _, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 20_000; i += 100 {
		rs := recs(i, i+100)
		if err := l.Append(rs); err != nil {
			b.Fatal(err)
		}
		var done []uint64
		for _, r := range rs[:50] {
			done = append(done, r.Seq)
		}
		if err := l.Ack(done...); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		l, got, err := Open(dir, Options{})
		if err != nil || len(got) != 10_000 {
			b.Fatalf("Open: %d records, %v", len(got), err)
		}
		_ = l.Close()
	}
	b.ReportMetric(10_000*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
