package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// tlsFiles serves the certificate of --tls-cert and --tls-key, and checks
// client certificates against --tls-ca-cert, as last loaded: a reload
// (SIGHUP) changes what new handshakes use, and connections already open
// keep theirs.
type tlsFiles struct {
	cert, key, ca string
	cur           atomic.Pointer[tlsLoaded]
}

// tlsLoaded is one load of the files.
type tlsLoaded struct {
	cert *tls.Certificate
	pool *x509.CertPool // nil without --tls-ca-cert
}

// tlsConfig returns the TLS configuration of cfg's files, which reads
// them through files (see tlsFiles.load), or nil, nil when TLS is off.
func tlsConfig(cfg Config) (*tls.Config, *tlsFiles, error) {
	if cfg.TLSCert == "" {
		return nil, nil, nil
	}
	f := &tlsFiles{cert: cfg.TLSCert, key: cfg.TLSKey, ca: cfg.TLSCACert}
	if err := f.load(); err != nil {
		return nil, nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.cur.Load().cert, nil }}
	if f.ca != "" {
		// The chain is verified in VerifyConnection, against the pool of
		// the last load, rather than by ClientCAs, which is fixed.
		tc.ClientAuth, tc.VerifyConnection = tls.RequireAnyClientCert, f.verifyClient
	}
	return tc, f, nil
}

// load reads the files; on an error the last load stays in use.
func (f *tlsFiles) load() error {
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	l := &tlsLoaded{cert: &cert}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return fmt.Errorf("--tls-ca-cert: %w", err)
		}
		l.pool = x509.NewCertPool()
		if !l.pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca-cert %s: no PEM certificate in it", f.ca)
		}
	}
	f.cur.Store(l)
	return nil
}

// verifyClient accepts a client whose certificate chains to the CA
// certificates of the last load, for client authentication.
func (f *tlsFiles) verifyClient(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: a client certificate is required")
	}
	opts := x509.VerifyOptions{Roots: f.cur.Load().pool, Intermediates: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: client certificate: %w", err)
	}
	return nil
}
