package testserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are the PEM files of a throwaway PKI generated for one test with
// crypto/x509, in a temp dir: a CA, a server certificate for 127.0.0.1
// and localhost, one for localhost alone and a client certificate, all
// signed by the CA, and a second, unrelated CA with a client certificate
// of its own (the wrong CA, to prove that verification fails closed on
// either side).
type Certs struct {
	CAFile         string // the CA that signed the server and client certificates
	ServerCertFile string // for 127.0.0.1, ::1 and localhost; server and client auth
	ServerKeyFile  string
	// NameCertFile is a server certificate for the name localhost only,
	// no IP address: a client verifies it only under the name.
	NameCertFile   string
	NameKeyFile    string
	ClientCertFile string // client auth
	ClientKeyFile  string

	OtherCAFile         string // a CA that signed none of the above
	OtherClientCertFile string // a client certificate signed by OtherCAFile
	OtherClientKeyFile  string
}

// NewCerts generates the certificates (ECDSA P-256, valid for a day) and
// writes them under t.TempDir().
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		block := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
		if err := os.WriteFile(path, block, 0o600); err != nil {
			t.Fatalf("testserver: certs: %v", err)
		}
		return path
	}
	c := &Certs{}
	ca, caKey := newCA(t, "fleetstore test CA")
	c.CAFile = write("ca.pem", "CERTIFICATE", ca.Raw)
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		// A replica or a Sentinel presents it to the master as a client.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	c.ServerCertFile, c.ServerKeyFile = leaf(t, write, "server", server, ca, caKey)
	byName := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	c.NameCertFile, c.NameKeyFile = leaf(t, write, "name", byName, ca, caKey)
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "fleetstore test client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	c.ClientCertFile, c.ClientKeyFile = leaf(t, write, "client", client, ca, caKey)

	other, otherKey := newCA(t, "fleetstore unrelated CA")
	c.OtherCAFile = write("other-ca.pem", "CERTIFICATE", other.Raw)
	otherClient := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "fleetstore stranger"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	c.OtherClientCertFile, c.OtherClientKeyFile =
		leaf(t, write, "other-client", otherClient, other, otherKey)
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testserver: certs: %v", err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testserver: certs: %v", err)
	}
	return n
}

// newCA returns a self-signed CA certificate and its key.
func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testserver: certs: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testserver: certs: %v", err)
	}
	return cert, key
}

// leaf signs tmpl with the CA and writes NAME.pem and NAME-key.pem.
func leaf(t testing.TB, write func(name, typ string, der []byte) string, name string,
	tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("testserver: certs: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testserver: certs: %v", err)
	}
	return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "PRIVATE KEY", keyDER)
}

// TLSQuery is the query of a TLS store URL (rediss, valkeys, memcacheds)
// naming the CA file ca and, when cert is not "", the client certificate
// cert and its key; "" names no file.
func TLSQuery(ca, cert, key string) string {
	q := url.Values{}
	if ca != "" {
		q.Set("tls_ca_file", ca)
	}
	if cert != "" {
		q.Set("tls_cert_file", cert)
		q.Set("tls_key_file", key)
	}
	return q.Encode()
}

// TLSClient is a client's TLS setting, as the query of a store URL, and
// whether a server of these Certs that requires a client certificate
// accepts it.
type TLSClient struct {
	Name  string
	Query string
	OK    bool
}

// Clients are the settings a TLS test of a driver tries against a server
// requiring a client certificate: the CA and the client certificate, or
// skip_verify and the certificate, connect; a wrong CA, the system's
// roots, no client certificate or one of another CA must fail closed.
func (c *Certs) Clients() []TLSClient {
	return []TLSClient{
		{"CA and client certificate", TLSQuery(c.CAFile, c.ClientCertFile, c.ClientKeyFile), true},
		{"skip_verify and client certificate", TLSQuery("", c.ClientCertFile, c.ClientKeyFile) +
			"&skip_verify=true", true},
		{"wrong CA", TLSQuery(c.OtherCAFile, c.ClientCertFile, c.ClientKeyFile), false},
		{"system roots", TLSQuery("", c.ClientCertFile, c.ClientKeyFile), false},
		{"no client certificate", TLSQuery(c.CAFile, "", ""), false},
		{"client certificate of another CA",
			TLSQuery(c.CAFile, c.OtherClientCertFile, c.OtherClientKeyFile), false},
	}
}
