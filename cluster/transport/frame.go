package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"
)

// RPC frames, after the connection header:
//
//	length uint32 (big-endian; bytes after this field, ≤ MaxFrame)
//	id     uint64 (chosen by the caller, echoed by the reply)
//	kind   byte   (frameRequest, frameReply or frameError)
//	request: timeout uint64 (ns the caller will wait; 0: no deadline),
//	         mlen byte, method [mlen]byte, body
//	reply:   body
//	error:   the handler's error text
const (
	frameRequest byte = 1
	frameReply   byte = 2
	frameError   byte = 3

	frameFixed    = 8 + 1 // id + kind, counted by length
	requestFixed  = 8 + 1 // timeout + mlen, after frameFixed in requests     // id + kind, counted by length
	maxFrameLimit = 1<<32 - 1
	minMaxFrame   = 256      // what the length field can say
	maxMethod     = 255      // a method name's length is one byte
	eagerAlloc    = 1 << 20  // frames up to this are allocated at once
	ioBufSize     = 32 << 10 // bufio sizes of RPC connections
)

// frame is one decoded RPC frame. Its slices alias the buffer readFrame
// allocated for it, which nothing else holds.
type frame struct {
	id      uint64
	kind    byte
	timeout time.Duration // requests only; 0: none
	method  string        // requests only
	body    []byte        // the body, or the error text
}

// requestLen returns the length field of a request frame.
func requestLen(method string, body []byte) uint64 {
	return frameFixed + requestFixed + uint64(len(method)) + uint64(len(body))
}

// writeFrame writes one frame to w (method only for requests). The
// caller checked the length against MaxFrame and serializes writers.
func writeFrame(w *bufio.Writer, f frame) error {
	n := frameFixed + uint64(len(f.body))
	if f.kind == frameRequest {
		n = requestLen(f.method, f.body)
	}
	var h [4 + frameFixed + requestFixed]byte
	binary.BigEndian.PutUint32(h[0:], uint32(n))
	binary.BigEndian.PutUint64(h[4:], f.id)
	h[12] = f.kind
	hl := 4 + frameFixed
	if f.kind == frameRequest {
		binary.BigEndian.PutUint64(h[13:], uint64(max(f.timeout, 0)))
		h[21] = byte(len(f.method))
		hl += requestFixed
	}
	w.Write(h[:hl])
	w.WriteString(f.method)
	_, err := w.Write(f.body)
	return err
}

// readFrame reads and decodes one frame, refusing (before allocating) a
// length above max or below the fixed part. Frames above eagerAlloc are
// buffered as their bytes arrive, so a peer that announces a large frame
// and stalls costs little memory.
func readFrame(r io.Reader, max int) (frame, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if uint64(n) > uint64(max) {
		return frame{}, fmt.Errorf("%w: %d bytes announced, limit %d", ErrFrameTooLarge, n, max)
	}
	if n < frameFixed {
		return frame{}, fmt.Errorf("%w: frame of %d bytes", errProtocol, n)
	}
	buf, err := readN(r, int(n))
	if err != nil {
		return frame{}, err
	}
	return decodeFrame(buf)
}

// readN reads exactly n bytes from r.
func readN(r io.Reader, n int) ([]byte, error) {
	if n <= eagerAlloc {
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, noEOF(err)
	}
	var b bytes.Buffer
	b.Grow(eagerAlloc)
	got, err := io.CopyN(&b, r, int64(n))
	if got < int64(n) {
		return nil, noEOF(err)
	}
	return b.Bytes(), nil
}

// noEOF turns an EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// decodeFrame splits b (a frame without its length) into its fields.
func decodeFrame(b []byte) (frame, error) {
	f := frame{id: binary.BigEndian.Uint64(b), kind: b[8], body: b[frameFixed:]}
	switch f.kind {
	case frameReply, frameError:
		return f, nil
	case frameRequest:
		if len(f.body) < requestFixed || int(f.body[8]) > len(f.body)-requestFixed {
			return frame{}, fmt.Errorf("%w: truncated request", errProtocol)
		}
		timeout := binary.BigEndian.Uint64(f.body)
		if timeout > math.MaxInt64 {
			return frame{}, fmt.Errorf("%w: request timeout %d", errProtocol, timeout)
		}
		ml := int(f.body[8])
		f.timeout = time.Duration(timeout)
		f.method, f.body = string(f.body[requestFixed:requestFixed+ml]), f.body[requestFixed+ml:]
		return f, nil
	}
	return frame{}, fmt.Errorf("%w: unknown frame kind %d", errProtocol, f.kind)
}
