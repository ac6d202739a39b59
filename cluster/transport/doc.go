// Package transport carries all of a node's cluster traffic over one TCP
// listener (--raft-addr): a raft stream layer per Raft group (the meta
// group and every data group) and request/response calls between nodes
// (a coordinator charging counters on another node's group leader, status
// polling, forwarding, and raft heartbeats).
//
// Raft heartbeats do not travel on the raft streams between nodes that
// both know the "raft.hb" call: package cluster/pulse sends every group's
// heartbeats to one node as one RPC per tick, body (uvarints, and bytes
// as a uvarint length then the bytes):
//
//	sender node id (bytes), sender status mark (uvarint, 0 = none),
//	count, then per heartbeat: group, raft protocol version, term,
//	leader id (bytes), leader address (bytes), raft's older leader
//	field (bytes)
//
// and the reply:
//
//	responder node id, responder status mark, count (equal to the
//	request's), then per heartbeat either 0 (no running replica of that
//	group there) or 1, epoch of the replica's handler, term, last log
//	index, flags (1 = success, 2 = no retry backoff)
//
// A body that does not parse exactly, or names more than 1025 heartbeats or
// a group above 1024, gets an error reply. The raft streams carry
// everything else (appends with entries or a commit index, votes,
// snapshots), and heartbeats to a node that answers raft.hb with an error.
//
// A Mux is the listener plus the outgoing connections. Mux.Stream(g)
// returns a raft.StreamLayer for raft.NewNetworkTransportWithConfig;
// Mux.Handle sets the function that serves incoming calls; Mux.Call makes
// one. Package cluster wires it; nothing here knows about groups' contents
// or about Redis, except that a handler's error text travels unchanged so
// that Redis-style refusals (MOVED, TRYAGAIN) pass through.
//
// # Wire format
//
// Every connection opens with a 10-byte header written by the dialer:
//
//	magic   4 bytes  "rlmx"
//	version 1 byte   1 (no secret) or 2 (Options.Secret set)
//	kind    1 byte   1 = raft stream, 2 = RPC
//	group   4 bytes  big-endian raft group id (raft); 0 (RPC)
//
// The acceptor reads exactly these 10 bytes, within
// Options.HandshakeTimeout, and closes the connection on a short read, a
// wrong magic or version, an unknown kind, or an RPC header with a nonzero
// group. With version 2 both ends then prove that they know the cluster's
// secret (an HMAC-SHA256 challenge each way, auth.go), within the same
// timeout; a connection that fails it, or whose version does not match
// whether the acceptor has a secret, is closed before anything else is
// read from it. After a raft header the connection belongs to raft: its bytes
// are raft's NetworkTransport protocol, untouched. After an RPC header both
// directions carry frames:
//
//	length 4 bytes  big-endian count of the bytes that follow, 9..MaxFrame
//	id     8 bytes  big-endian; chosen by the caller, echoed by the reply
//	kind   1 byte   1 = request, 2 = reply, 3 = error reply
//	request:     timeout 8 bytes (big-endian ns the caller will wait,
//	             0 = no deadline; the handler's ctx gets it), mlen 1 byte,
//	             method mlen bytes, body (the rest)
//	reply:       body (the rest)
//	error reply: the remote handler's error text (the rest)
//
// Requests travel only from dialer to acceptor, replies only back. A frame
// whose length is above the receiver's Options.MaxFrame closes the
// connection before anything is allocated for it; frames above 1 MiB are
// buffered as their bytes arrive, never allocated from the length alone. A
// malformed frame (length below 9, unknown kind, a request shorter than
// its fixed part or its method name, a timeout above 1<<63-1, a request
// sent to a caller) closes the connection too. An RPC connection that
// sent its header may then stay idle indefinitely: that is a pooled
// connection between calls.
//
// # Guarantees
//
//   - Raft connections: Dial writes the header and hands the connection to
//     raft. The acceptor delivers it to group g's Accept. A connection for
//     a group with no registered Stream, or whose Accept is 64 connections
//     behind, is held up to Options.HoldTimeout (default 3s; at most 256
//     such connections at once) for one to register, then closed, so a
//     peer whose group starts a moment earlier is not turned away, and raft
//     retries the rest. A layer's Close unregisters that group only.
//   - RPC connections are pooled per peer address (Options.MaxIdlePerPeer,
//     default 2) and multiplexed: any number of calls share a connection,
//     matched by id. Internal calls are small (under 1 KB) and come by the
//     tens of thousands per second from many goroutines; one call per
//     connection would need as many connections as calls in flight, and a
//     dial (and a TIME_WAIT socket) whenever that passes the pool's size.
//     Frames written concurrently go out in one flush, and replies come
//     back in whatever order the handlers finish. A call whose ctx ends
//     stops waiting at once;
//     its connection stays in use for the others and the late reply is
//     dropped. Only a ctx that ends while its request is half-written, or
//     an I/O error, fails (and discards) the connection, with every call on
//     it.
//   - Each request runs its handler in its own goroutine (at most 1024 per
//     connection; beyond that the connection is not read until one
//     finishes), so a slow handler delays no other call. The handler's ctx
//     carries the caller's deadline, sent as a duration so clocks need not
//     agree; a reply finished after it is not sent.
//   - Errors: the remote handler's error comes back as *RemoteError with
//     its exact text; every transport failure wraps ErrUnreachable (and
//     ctx.Err() when ctx ended); after Close, ErrClosed. A request that was
//     sent before the failure may have run on the peer.
//   - Close closes the listener and every connection; the stream layers'
//     Accept then fails. Hostile or broken input closes the offending
//     connection only; it never panics the mux nor delays other peers.
package transport
