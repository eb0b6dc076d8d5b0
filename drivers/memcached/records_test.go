package memcached

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// mcRecord is one item memcached holds, with its remaining time to live
// as memcached counts it (whole seconds; negative: no expiry).
type mcRecord struct {
	Key string
	TTL time.Duration
}

// mcRecords lists the live items of tenant under prefix on every server
// in addrs: lru_crawler metadump lists the keys, then "mg KEY t" asks
// each one's liveness and TTL from memcached itself.
func mcRecords(ctx context.Context, addrs []string, prefix, tenant string) ([]mcRecord, error) {
	k := keys{prefix: prefix}
	bucket := k.bucket(tenant)
	claimPrefix, claimSuffix := prefix+":c:", ":"+token(tenant)
	var out []mcRecord
	for _, a := range addrs {
		err := func() error {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "tcp", a)
			if err != nil {
				return err
			}
			defer nc.Close()
			if dl, ok := ctx.Deadline(); ok {
				nc.SetDeadline(dl)
			}
			r := bufio.NewReader(nc)
			if _, err := fmt.Fprintf(nc, "lru_crawler metadump all\r\n"); err != nil {
				return err
			}
			var found []string
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return err
				}
				line = strings.TrimRight(line, "\r\n")
				if line == "END" {
					break
				}
				if strings.HasPrefix(line, "BUSY") || strings.HasPrefix(line, "ERROR") {
					return fmt.Errorf("metadump: %s", line)
				}
				f, _, _ := strings.Cut(line, " ")
				key, err := url.PathUnescape(strings.TrimPrefix(f, "key="))
				if err != nil {
					return err
				}
				if key == bucket || strings.HasPrefix(key, claimPrefix) && strings.HasSuffix(key, claimSuffix) {
					found = append(found, key)
				}
			}
			for _, key := range found {
				if _, err := fmt.Fprintf(nc, "mg %s t\r\n", key); err != nil {
					return err
				}
				line, err := r.ReadString('\n')
				if err != nil {
					return err
				}
				line = strings.TrimRight(line, "\r\n")
				if line == "EN" {
					continue // expired or gone
				}
				ttl, ok := strings.CutPrefix(line, "HD t")
				if !ok {
					return fmt.Errorf("mg %s: %q", key, line)
				}
				n, err := strconv.Atoi(ttl)
				if err != nil {
					return fmt.Errorf("mg %s: %q", key, line)
				}
				out = append(out, mcRecord{Key: key, TTL: time.Duration(n) * time.Second})
			}
			return nil
		}()
		if err != nil {
			return nil, fmt.Errorf("records on %s: %w", a, err)
		}
	}
	return out, nil
}
