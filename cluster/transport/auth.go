package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Authentication. With Options.Secret set, a connection's header carries
// versionAuth and both ends prove that they know the secret before any
// byte of raft or RPC crosses the connection:
//
//	dialer   → header | nonce D (16 random bytes)
//	acceptor → nonce A (16) | HMAC-SHA256(secret, "rlmx acceptor" | header | D | A)
//	dialer   → HMAC-SHA256(secret, "rlmx dialer" | header | D | A)
//
// Each side checks the other's MAC and closes the connection on a
// mismatch: a client without the secret has nothing of raft or RPC served,
// and a node sends nothing to a listener that cannot prove it shares the
// secret. The labels differ so that neither side's MAC can be reflected
// as the other's, and the nonces are fresh on both sides so that no MAC
// can be replayed. Without a secret, headers carry versionOpen and there
// is no exchange. A mux with a secret refuses versionOpen and one without
// refuses versionAuth, so a node set up unlike the others is refused, with
// a log line saying why, rather than half-working.
const (
	versionOpen = 1 // no secret: the header alone
	versionAuth = 2 // the header, then the exchange above

	nonceLen = 16
	macLen   = sha256.Size
)

// errAuth is why a connection failed the exchange.
var errAuth = errors.New("transport: the peer does not prove the cluster secret")

// sign returns the MAC of one side (label) of the exchange.
func sign(secret []byte, label string, h [headerLen]byte, dNonce, aNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(h[:])
	m.Write(dNonce)
	m.Write(aNonce)
	return m.Sum(nil)
}

// proveDialer runs the dialer's side of the exchange on c, whose header h
// is not written yet, within deadline.
func proveDialer(c net.Conn, secret []byte, h [headerLen]byte, deadline time.Time) error {
	c.SetDeadline(deadline)
	out := make([]byte, 0, headerLen+nonceLen)
	out = append(out, h[:]...)
	dNonce := make([]byte, nonceLen)
	rand.Read(dNonce)
	if _, err := c.Write(append(out, dNonce...)); err != nil {
		return err
	}
	var in [nonceLen + macLen]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return fmt.Errorf("%w (no answer to the challenge: %w)", errAuth, err)
	}
	aNonce := in[:nonceLen]
	if !hmac.Equal(in[nonceLen:], sign(secret, "rlmx acceptor", h, dNonce, aNonce)) {
		return errAuth
	}
	if _, err := c.Write(sign(secret, "rlmx dialer", h, dNonce, aNonce)); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// proveAcceptor runs the acceptor's side of the exchange on c after its
// header h, within deadline.
func proveAcceptor(c net.Conn, secret []byte, h [headerLen]byte, deadline time.Time) error {
	c.SetDeadline(deadline)
	dNonce := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, dNonce); err != nil {
		return err
	}
	aNonce := make([]byte, nonceLen)
	rand.Read(aNonce)
	if _, err := c.Write(append(aNonce, sign(secret, "rlmx acceptor", h, dNonce, aNonce)...)); err != nil {
		return err
	}
	var got [macLen]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return fmt.Errorf("%w (no answer to the challenge: %w)", errAuth, err)
	}
	if !hmac.Equal(got[:], sign(secret, "rlmx dialer", h, dNonce, aNonce)) {
		return errAuth
	}
	return c.SetDeadline(time.Time{})
}

// warnThrottle lets one warning through per second, so that a flood of
// refused connections cannot flood the log.
type warnThrottle struct{ last atomic.Int64 }

func (w *warnThrottle) allow() bool {
	now := time.Now().UnixNano()
	last := w.last.Load()
	return now-last >= int64(time.Second) && w.last.CompareAndSwap(last, now)
}
