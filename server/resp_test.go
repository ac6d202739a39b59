package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// chunkReader returns its data a few bytes per Read, to exercise requests
// split across reads.
type chunkReader struct {
	data []byte
	rng  *rand.Rand
	max  int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+c.rng.IntN(c.max))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// parseAll reads every request from r, a batch at a time as the server
// does (every complete request parsed before any is used), and renders each
// as its arguments joined by '|', followed by the error that stopped the
// reader.
func parseAll(r io.Reader, max int) ([]string, error) {
	rd := reader{r: r, max: max, buf: make([]byte, 64)}
	var out []string
	render := func(batch [][][]byte) {
		for _, args := range batch {
			parts := make([]string, len(args))
			for i, a := range args {
				parts[i] = string(a)
			}
			out = append(out, strings.Join(parts, "|"))
		}
	}
	for {
		rd.reset()
		var batch [][][]byte
		for {
			args, err := rd.next()
			if err != nil {
				render(batch)
				return out, err
			}
			if args == nil {
				break
			}
			batch = append(batch, args)
		}
		render(batch)
		if err := rd.fill(); err != nil {
			return out, err
		}
	}
}

func TestReaderParsesRequests(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
		err      error
	}{
		{"one", "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", []string{"PING|hi"}, io.EOF},
		{"pipelined", "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$0\r\n\r\n", []string{"PING", "GET|"}, io.EOF},
		{"binary bulk", "*1\r\n$4\r\n\r\n\x00\n\r\n", []string{"\r\n\x00\n"}, io.EOF},
		{"empty array skipped", "*0\r\n*-1\r\n*1\r\n$1\r\nx\r\n", []string{"x"}, io.EOF},
		{"inline", "PING\r\nSET  a   b\nrl.check k token 10 60\r\n", []string{"PING", "SET|a|b", "rl.check|k|token|10|60"}, io.EOF},
		{"blank inline lines", "\r\n   \r\n\nPING\r\n", []string{"PING"}, io.EOF},
		{"inline quotes", `ECHO "a b" 'c d' "x\x41\n\"" 'it\'s' ""` + "\r\n", []string{"ECHO|a b|c d|xA\n\"|it's|"}, io.EOF},
		{"quoted inline batch", "SET \"k 1\" \"v 1\"\r\nSET \"k 2\" \"v 2\"\r\n*1\r\n$1\r\nx\r\nGET \"k 3\"\r\n",
			[]string{"SET|k 1|v 1", "SET|k 2|v 2", "x", "GET|k 3"}, io.EOF},
		{"inline garbage", "\x00\x01\xfe garbage\r\n", []string{"\x00\x01\xfe|garbage"}, io.EOF},
		{"incomplete", "*2\r\n$4\r\nPING\r\n$2\r\nh", nil, io.EOF},
		{"bad count", "*abc\r\n", nil, errMultibulkLength},
		{"count too large", "*1048577\r\n", nil, errMultibulkLength},
		{"count with leading zero", "*01\r\n$1\r\nx\r\n", nil, errMultibulkLength},
		{"LF without CR", "*1\n$1\r\nx\r\n", nil, errMultibulkLength},
		{"bad bulk length", "*1\r\n$x\r\n", nil, errBulkLength},
		{"negative bulk", "*1\r\n$-5\r\n", nil, errBulkLength},
		{"bulk without CRLF", "*1\r\n$1\r\nxy\r\n", nil, errBulkLength},
		{"bulk length with leading zero", "*1\r\n$01\r\nx\r\n", nil, errBulkLength},
		{"bulk length with a sign", "*1\r\n$+1\r\nx\r\n", nil, errBulkLength},
		{"bulk length then a space", "*1\r\n$1 \r\nx\r\n", nil, errBulkLength},
		{"bulk length LF without CR", "*1\r\n$1\nx\r\n", nil, errBulkLength},
		{"bulk length of 19 digits", "*1\r\n$1000000000000000000\r\n", nil, errTooBig},
		{"bulk length beyond int64", "*1\r\n$99999999999999999999\r\n", nil, errBulkLength},
		{"zero and two-digit lengths", "*3\r\n$0\r\n\r\n$10\r\n0123456789\r\n$2\r\n\r\n\r\n",
			[]string{"|0123456789|\r\n"}, io.EOF},
		{"not a bulk", "*1\r\n:1\r\n", nil, errExpectedDollar(':')},
		{"bulk beyond max", "*2\r\n$4\r\nECHO\r\n$1000000000\r\n", nil, errTooBig},
		{"unbalanced", "ECHO \"abc\r\n", nil, errUnbalancedQuotes},
		{"quote then letter", "ECHO \"a\"b\r\n", nil, errUnbalancedQuotes},
		{"good before bad", "PING\r\n*x\r\n", []string{"PING"}, errMultibulkLength},
		{"array then inline", "*3\r\n$1\r\na\r\n$0\r\n\r\n$2\r\nbc\r\nPING\r\n*1\r\n$1\r\nd\r\n",
			[]string{"a||bc", "PING", "d"}, io.EOF},
		{"bad element after good ones", "*3\r\n$1\r\na\r\n$1\r\nb\r\n:1\r\n", nil, errExpectedDollar(':')},
		{"inline line beyond 64 KiB", strings.Repeat("a", 70000) + "\r\n", nil, errInlineTooBig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(0); seed < 20; seed++ {
				r := &chunkReader{data: []byte(c.in), rng: rand.New(rand.NewPCG(seed, 0)), max: 1 + int(seed)*3}
				got, err := parseAll(r, 1<<20)
				if fmt.Sprint(got) != fmt.Sprint(c.want) || !sameErr(err, c.err) {
					t.Fatalf("seed %d: %q\n got %q, %v\nwant %q, %v", seed, c.in, got, err, c.want, c.err)
				}
			}
		})
	}
}

func sameErr(a, b error) bool {
	return errors.Is(a, b) || (a != nil && b != nil && a.Error() == b.Error())
}

func TestReaderBoundsOneRequestNotTheBatch(t *testing.T) {
	one := "*2\r\n$4\r\nECHO\r\n$100\r\n" + strings.Repeat("x", 100) + "\r\n"
	// Many requests of 124 bytes in one stream are fine under a 200-byte
	// bound; one request of 1000 bytes is not.
	got, err := parseAll(strings.NewReader(strings.Repeat(one, 50)), 200)
	if len(got) != 50 || err != io.EOF {
		t.Fatalf("50 small requests: parsed %d, err %v", len(got), err)
	}
	big := "*2\r\n$4\r\nECHO\r\n$1000\r\n" + strings.Repeat("x", 1000) + "\r\n"
	if _, err := parseAll(strings.NewReader(big), 200); err != errTooBig {
		t.Fatalf("big bulk: err %v, want errTooBig", err)
	}
	if _, err := parseAll(strings.NewReader(strings.Repeat("A", 5000)), 200); err != errTooBig {
		t.Fatalf("endless inline line: err %v, want errTooBig", err)
	}
}

// TestReaderDoesNotAllocate: parsing a pipelined batch of RL.CHECKs from a
// warm buffer allocates nothing.
func TestReaderDoesNotAllocate(t *testing.T) {
	batch := bytes.Repeat([]byte(resp("RL.CHECK", "key:000000012345", "token", "100", "60")), 16)
	src := bytes.NewReader(nil)
	rd := reader{r: src, max: DefaultMaxRequest, buf: make([]byte, initialReadBuf)}
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(batch)
		rd.reset()
		if err := rd.fill(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			args, err := rd.next()
			if err != nil {
				t.Fatal(err)
			}
			if args == nil {
				break
			}
			n++
		}
		if n != 16 {
			t.Fatalf("parsed %d requests, want 16", n)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocs per batch, want 0", allocs)
	}
}

// FuzzReader: whatever the input and however it is split across reads, the
// reader parses the same requests and stops at the same error, and never
// panics. Its corpus (testdata/fuzz/FuzzReader) holds the inputs of issue
// 10: many empty arguments, arrays split anywhere, HTTP lines, bad lengths.
func FuzzReader(f *testing.F) {
	f.Add([]byte("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\nPING\r\n"), uint8(3))
	f.Add([]byte(`ECHO "a\x41" 'b\'c'`+"\r\n*1\r\n$-1\r\n"), uint8(1))
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*0\r\n"), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		whole, errWhole := parseAll(bytes.NewReader(data), 1<<16)
		r := &chunkReader{data: data, rng: rand.New(rand.NewPCG(uint64(chunk), 1)), max: 1 + int(chunk)}
		split, errSplit := parseAll(r, 1<<16)
		if fmt.Sprint(whole) != fmt.Sprint(split) || !sameErr(errWhole, errSplit) {
			t.Fatalf("whole: %q, %v\nsplit: %q, %v", whole, errWhole, split, errSplit)
		}
	})
}
