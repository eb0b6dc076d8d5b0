package memcached

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"strconv"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/tlsfiles"
)

// tlsParams are the parameters of a memcacheds:// URL only.
var tlsParams = append([]string{"skip_verify"}, tlsfiles.Params...)

// tlsConfig is the TLS configuration of a memcacheds:// URL, nil for
// memcached://: TLS 1.2 at least, the system's roots or tls_ca_file's
// CAs, the client certificate of tls_cert_file and tls_key_file, no
// verification with skip_verify=true. Errors wrap ErrInvalid and name
// the parameter.
func tlsConfig(scheme string, q url.Values) (*tls.Config, error) {
	if scheme != "memcacheds" {
		for _, name := range tlsParams {
			if q.Has(name) {
				return nil, driver.Invalid("url: "+name, "only for memcacheds:// (TLS)")
			}
		}
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if q.Has("skip_verify") {
		v := q.Get("skip_verify")
		skip, err := strconv.ParseBool(v)
		if err != nil {
			return nil, driver.Invalid("url: skip_verify", "want true or false, got "+driver.Quote(v))
		}
		c.InsecureSkipVerify = skip
	}
	if err := tlsfiles.Apply(c, q); err != nil {
		return nil, err
	}
	return c, nil
}

// dial connects to address (an "IP:PORT" of PickServer) with d, over TLS
// for memcacheds://, the handshake within ctx and d's deadline, the
// server's certificate verified under its host as in the URL.
func (sv *servers) dial(
	ctx context.Context, d *net.Dialer, network, address string,
) (net.Conn, error) {
	if sv.tls == nil {
		return d.DialContext(ctx, network, address)
	}
	c := sv.tls
	if c.ServerName == "" {
		c = c.Clone()
		c.ServerName = sv.hostOf(address)
	}
	return (&tls.Dialer{NetDialer: d, Config: c}).DialContext(ctx, network, address)
}

// hostOf is the URL's host of the resolved address, or the address's
// own host when none matches.
func (sv *servers) hostOf(address string) string {
	if p := sv.addrs.Load(); p != nil {
		for _, a := range *p {
			if a, ok := a.(addr); ok && a.s == address {
				return a.host
			}
		}
	}
	host, _, _ := net.SplitHostPort(address)
	return host
}
