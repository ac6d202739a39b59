package transport

import "errors"

// The package's sentinel errors. Functions wrap them with %w and context;
// check them with errors.Is.
var (
	// ErrClosed is returned by every operation on a Mux after Close, and by
	// the Accept of its stream layers.
	ErrClosed = errors.New("transport: mux closed")

	// ErrStreamClosed is returned by Accept and Dial of a stream layer
	// after that layer's Close.
	ErrStreamClosed = errors.New("transport: stream layer closed")

	// ErrUnreachable is wrapped by every failure of Call that is not the
	// remote handler's answer: the peer could not be dialled, the
	// connection broke, or ctx ended before the reply arrived. When the
	// request had already been sent, the peer may or may not have run it.
	ErrUnreachable = errors.New("transport: peer unreachable")

	// ErrFrameTooLarge is returned by Call when a request would exceed
	// Options.MaxFrame (nothing is sent), and is the cause wrapped with
	// ErrUnreachable when a peer sends a frame above it.
	ErrFrameTooLarge = errors.New("transport: frame too large")

	// errProtocol is why a connection that breaks the wire format is
	// closed; it is logged, never returned to callers unwrapped.
	errProtocol = errors.New("transport: protocol violation")
)

// RemoteError is the error returned by Call when the remote Handler
// returned an error: Msg is that error's text, byte for byte, so a
// Redis-style reply ("MOVED 123 127.0.0.1:7001", "TRYAGAIN ...") can be
// passed on unchanged. It never wraps ErrUnreachable: the peer answered.
type RemoteError struct {
	Msg string
}

// Error returns Msg unchanged.
func (e *RemoteError) Error() string { return e.Msg }
