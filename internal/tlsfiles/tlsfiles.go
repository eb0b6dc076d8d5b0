// Package tlsfiles reads the TLS files a store URL names, for the network
// drivers' Open (redis, valkey, memcached): the same three parameters, with
// the same meaning and errors, in every driver. Neither go-redis's nor
// valkey-go's ParseURL has parameters for them (the clients take a
// *tls.Config), so the names are the Redis server's own directives in the
// URL's snake_case:
//
//	tls_ca_file    PEM file of the CA certificates that verify the server,
//	               instead of the system's roots
//	tls_cert_file  PEM file of the client certificate (chain) to present,
//	               for a server that asks for one (tls-auth-clients yes,
//	               memcached ssl_verify_mode=2); needs tls_key_file
//	tls_key_file   PEM file of that certificate's private key
//
// The files are read once, by Open: that is local I/O, not network I/O
// (CONTRACT T3), and a bad path or file is an error at Open rather than
// an outage at the first call. A renewed certificate takes a new Store.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/fleetstore/fleetstore/driver"
)

// The URL parameters.
const (
	CAFile   = "tls_ca_file"
	CertFile = "tls_cert_file"
	KeyFile  = "tls_key_file"
)

// Params are the parameters, for driver.CheckParams.
var Params = []string{CAFile, CertFile, KeyFile}

// Given returns the first of Params that q has, or "".
func Given(q url.Values) string {
	for _, name := range Params {
		if q.Has(name) {
			return name
		}
	}
	return ""
}

// Take removes Params from q, before q goes to a client's own URL parser
// (go-redis's rejects names it does not know), and returns them, for
// Apply.
func Take(q url.Values) url.Values {
	files := url.Values{}
	for _, name := range Params {
		if vs, ok := q[name]; ok {
			files[name] = vs
			q.Del(name)
		}
	}
	return files
}

// Apply reads the files q names into c: RootCAs from tls_ca_file, one
// client certificate from tls_cert_file and tls_key_file. Parameters q
// lacks leave c as it is. Errors wrap driver.ErrInvalid, name the
// parameter and say why, quoting the path but never a file's content.
func Apply(c *tls.Config, q url.Values) error {
	for _, name := range Params {
		if n := len(q[name]); n > 1 {
			return driver.Invalid("url: "+name, "given "+strconv.Itoa(n)+" times")
		}
	}
	if q.Has(CAFile) {
		pemCerts, err := read(q, CAFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemCerts) {
			return driver.Invalid("url: "+CAFile, "no PEM certificate in "+strconv.Quote(q.Get(CAFile)))
		}
		c.RootCAs = pool
	}
	switch {
	case q.Has(CertFile) && !q.Has(KeyFile):
		return driver.Invalid("url: "+KeyFile, "missing: "+CertFile+" needs the file of its private key")
	case q.Has(KeyFile) && !q.Has(CertFile):
		return driver.Invalid("url: "+CertFile,
			"missing: "+KeyFile+" is the key of a client certificate, which is not given")
	case !q.Has(CertFile):
		return nil
	}
	certPEM, err := read(q, CertFile)
	if err != nil {
		return err
	}
	keyPEM, err := read(q, KeyFile)
	if err != nil {
		return err
	}
	if !hasCert(certPEM) {
		return driver.Invalid("url: "+CertFile, "no PEM certificate in "+strconv.Quote(q.Get(CertFile)))
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The certificate parsed: what is left is the key's (missing,
		// malformed, or not this certificate's).
		why := strings.TrimPrefix(err.Error(), "tls: ")
		return driver.Invalid("url: "+KeyFile, strconv.Quote(q.Get(KeyFile))+": "+why)
	}
	c.Certificates = []tls.Certificate{pair}
	return nil
}

// read returns the content of the file parameter name of q names.
func read(q url.Values, name string) ([]byte, error) {
	path := q.Get(name)
	if path == "" {
		return nil, driver.Invalid("url: "+name, "empty: want the path of a PEM file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // its message repeats the path
		}
		return nil, driver.Invalid("url: "+name, "cannot read "+strconv.Quote(path)+": "+err.Error())
	}
	return b, nil
}

// hasCert reports whether b holds a PEM CERTIFICATE block that parses.
func hasCert(b []byte) bool {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return false
		}
		if block.Type == "CERTIFICATE" {
			_, err := x509.ParseCertificate(block.Bytes)
			return err == nil
		}
	}
}
