package transport

import (
	"log/slog"
	"time"
)

// Defaults applied by Listen to the zero fields of Options.
const (
	DefaultDialTimeout      = 5 * time.Second
	DefaultMaxIdlePerPeer   = 2
	DefaultMaxFrame         = 64 << 20
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultHoldTimeout      = 3 * time.Second
)

// Options configures a Mux. The zero value is usable: Listen fills every
// zero field with its default.
type Options struct {
	// Logger receives the mux's few messages (rejected connections at
	// Debug, accept failures at Warn). Default: discard.
	Logger *slog.Logger

	// DialTimeout bounds the dial and header write of an RPC connection
	// (raft's dials use the timeout raft passes). Default 5s.
	DialTimeout time.Duration

	// MaxIdlePerPeer is how many RPC connections are kept open to each
	// peer address. Each carries any number of concurrent calls
	// (requests are multiplexed by id), so this is not a bound on
	// concurrency; calls are spread over the connections round-robin.
	// Default 2.
	MaxIdlePerPeer int

	// MaxFrame bounds an RPC frame's length field (everything after the
	// four length bytes), on both sides: Call refuses a larger request,
	// a peer's larger frame closes the connection before anything is
	// allocated for it, and a handler's larger reply is replaced by an
	// error reply. Default 64 MiB; at least 256 B, at most 1<<32-1. The
	// nodes of a cluster should agree on it: a request above the
	// receiver's bound closes the connection and so fails the calls
	// sharing it.
	MaxFrame int

	// Advertise is the address the other nodes dial to reach this mux,
	// and what the stream layers' Addr reports (so raft's LocalAddr).
	// Default: the listener's address. A port of 0 or none is replaced by
	// the listener's port, so "127.0.0.1:0" can be passed through.
	Advertise string

	// Handler, if set, is the RPC handler from the start, as if Handle
	// were called right after Listen but before the first accept.
	Handler Handler

	// HandshakeTimeout bounds how long an accepted connection may take to
	// send its header; slower or silent connections are closed. Default 5s.
	HandshakeTimeout time.Duration

	// Secret, if set, is shared by every node of the cluster: each
	// connection, dialed or accepted, proves knowledge of it before
	// anything else crosses it (auth.go), and a connection that does not
	// is closed. Muxes with and without a secret refuse each other.
	Secret []byte

	// HoldTimeout is how long a raft connection for a group with no
	// registered Stream (or whose Accept is not keeping up) is held,
	// waiting for one, before it is closed. Negative: such connections
	// are closed at once. Default 3s.
	HoldTimeout time.Duration
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.MaxIdlePerPeer <= 0 {
		o.MaxIdlePerPeer = DefaultMaxIdlePerPeer
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	o.MaxFrame = max(o.MaxFrame, minMaxFrame)
	if uint64(o.MaxFrame) > maxFrameLimit {
		o.MaxFrame = maxFrameLimit
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.HoldTimeout == 0 {
		o.HoldTimeout = DefaultHoldTimeout
	}
	return o
}
