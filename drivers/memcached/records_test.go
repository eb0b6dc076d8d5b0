package memcached

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// mcRecords lists the live items of tenant under prefix on every server
// in addrs: lru_crawler metadump lists the claim keys, those that carry
// the tenant's server hash (a fresh item can be missing from one dump: the
// union of three is taken), the bucket key is known, then "mg KEY t" asks
// each one's liveness and TTL from memcached itself. A claim key carries a
// 32-bit hash of its tenant, not the tenant: a claim of another tenant
// whose hash is the same (2^-32 a pair) is listed too.
func mcRecords(ctx context.Context, addrs []string, prefix, tenant string) ([]driver.Record, error) {
	k := keys{prefix: prefix}
	bucket := k.bucket(tenant)
	claimPrefix, hash := prefix+":c:", tenantHash(tenant)
	var out []driver.Record
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
			found := []string{bucket}
			for i := range 3 {
				if i > 0 {
					time.Sleep(10 * time.Millisecond)
				}
				var keys []string
				var err error
				// BUSY: another metadump (a clause running beside this
				// one) has the crawler; it is done in milliseconds.
				for busy := 0; ; busy++ {
					keys, err = mcDump(nc, r, func(key string) bool {
						h, ok := claimHash(key)
						return ok && h == hash && strings.HasPrefix(key, claimPrefix) && len(key) == len(claimPrefix)+claimIDLen
					})
					if err == nil || !errors.Is(err, errBusy) || busy == 100 || ctx.Err() != nil {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				if err != nil {
					return err
				}
				for _, k := range keys {
					if !slices.Contains(found, k) {
						found = append(found, k)
					}
				}
			}
			for _, key := range found {
				ttl, ok, err := mcTTL(nc, r, key)
				if err != nil {
					return err
				}
				if ok {
					out = append(out, driver.Record{Key: key, TTL: ttl})
				}
			}
			return nil
		}()
		if err != nil {
			return nil, fmt.Errorf("records on %s: %w", a, err)
		}
	}
	return out, nil
}

// errBusy is memcached's answer to a metadump while another one runs.
var errBusy = errors.New("crawler busy")

// mcDump returns the keys of a metadump that match.
func mcDump(nc net.Conn, r *bufio.Reader, match func(string) bool) ([]string, error) {
	if _, err := fmt.Fprintf(nc, "lru_crawler metadump all\r\n"); err != nil {
		return nil, err
	}
	var found []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			return found, nil
		}
		if strings.HasPrefix(line, "BUSY") {
			return nil, fmt.Errorf("metadump: %w: %s", errBusy, line)
		}
		if strings.HasPrefix(line, "ERROR") {
			return nil, fmt.Errorf("metadump: %s", line)
		}
		f, _, _ := strings.Cut(line, " ")
		key, err := url.PathUnescape(strings.TrimPrefix(f, "key="))
		if err != nil {
			return nil, err
		}
		if match(key) {
			found = append(found, key)
		}
	}
}

// mcTTL asks memcached whether key is live and its remaining TTL (negative:
// none).
func mcTTL(nc net.Conn, r *bufio.Reader, key string) (time.Duration, bool, error) {
	if _, err := fmt.Fprintf(nc, "mg %s t\r\n", key); err != nil {
		return 0, false, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, false, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "EN" {
		return 0, false, nil // expired or gone
	}
	ttl, ok := strings.CutPrefix(line, "HD t")
	n, err := strconv.Atoi(ttl)
	if !ok || err != nil {
		return 0, false, fmt.Errorf("mg %s: %q", key, line)
	}
	return time.Duration(n) * time.Second, true, nil
}
