package transport

import (
	"encoding/binary"
	"fmt"
)

// The connection header: what a dialer writes first on every connection.
const (
	headerLen = 10 // magic(4) version(1) kind(1) group(4)

	kindRaft byte = 1 // a raft stream for the header's group
	kindRPC  byte = 2 // request/response frames; group must be 0
)

// magic opens every connection: "rlmx", rlserver mux.
var magic = [4]byte{'r', 'l', 'm', 'x'}

// header is a decoded connection header.
type header struct {
	version byte // versionOpen or versionAuth (auth.go)
	kind    byte
	group   uint32
}

// encodeHeader returns the header bytes for kind and group, without a
// secret (versionOpen).
func encodeHeader(kind byte, group uint32) [headerLen]byte {
	return encodeHeaderVersion(versionOpen, kind, group)
}

// encodeHeaderVersion returns the header bytes for version, kind and group.
func encodeHeaderVersion(version, kind byte, group uint32) [headerLen]byte {
	var b [headerLen]byte
	copy(b[:4], magic[:])
	b[4] = version
	b[5] = kind
	binary.BigEndian.PutUint32(b[6:], group)
	return b
}

// parseHeader decodes and checks b: the magic, a known version and kind,
// and a zero group for RPC connections.
func parseHeader(b [headerLen]byte) (header, error) {
	if [4]byte(b[:4]) != magic {
		return header{}, fmt.Errorf("%w: bad magic %q", errProtocol, b[:4])
	}
	if b[4] != versionOpen && b[4] != versionAuth {
		return header{}, fmt.Errorf("%w: unsupported version %d", errProtocol, b[4])
	}
	h := header{version: b[4], kind: b[5], group: binary.BigEndian.Uint32(b[6:])}
	switch {
	case h.kind == kindRaft:
	case h.kind == kindRPC && h.group == 0:
	case h.kind == kindRPC:
		return header{}, fmt.Errorf("%w: rpc header with group %d", errProtocol, h.group)
	default:
		return header{}, fmt.Errorf("%w: unknown kind %d", errProtocol, h.kind)
	}
	return h, nil
}
