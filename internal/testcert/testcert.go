// Package testcert makes throwaway TLS certificates for tests: a CA, a
// server certificate for 127.0.0.1 and localhost, and a client
// certificate, all signed by the CA, written as PEM files.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is a CA and the certificates it signed, in memory and as files.
type Set struct {
	CAFile, CertFile, KeyFile, ClientCertFile, ClientKeyFile string

	Pool   *x509.CertPool  // holds the CA
	Server tls.Certificate // for 127.0.0.1 and localhost
	Client tls.Certificate // for client authentication
}

// New makes a Set in a temporary directory of t.
func New(t testing.TB) *Set {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rlserver test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	s := &Set{CAFile: filepath.Join(dir, "ca.pem"), Pool: x509.NewCertPool()}
	s.Pool.AddCert(caCert)
	writePEM(t, s.CAFile, "CERTIFICATE", caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, name string) (tls.Certificate, string, string) {
		key := newKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certFile, keyFile
	}
	s.Server, s.CertFile, s.KeyFile = leaf(2, x509.ExtKeyUsageServerAuth, "server")
	s.Client, s.ClientCertFile, s.ClientKeyFile = leaf(3, x509.ExtKeyUsageClientAuth, "client")
	return s
}

// ServerConfig returns a server's TLS configuration, requiring client
// certificates signed by the CA if clientAuth.
func (s *Set) ServerConfig(clientAuth bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{s.Server}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		c.ClientCAs, c.ClientAuth = s.Pool, tls.RequireAndVerifyClientCert
	}
	return c
}

// ClientConfig returns a client's TLS configuration trusting the CA,
// presenting the client certificate if withCert.
func (s *Set) ClientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: s.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{s.Client}
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
