package values_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/memkeys"
	"github.com/rlserver/rlserver/values"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the current format's golden fixtures in testdata/golden (never an older format's)")

// goldenFormat is the directory of the current encoding's fixtures; a new
// format gets a new directory and the old ones stay, to keep decoding.
const goldenFormat = "v1"

// goldenValues builds each fixture's value at key k with commands.
var goldenValues = []struct {
	name string
	cmds []string
}{
	{"string", []string{"SET k hello"}},
	{"string-empty", []string{`SET k ""`}},
	{"string-binary", []string{`SET k "\x00\xff\r\n"`}},
	{"string-int", []string{"INCRBY k 42"}},
	{"string-int-min", []string{"SET k -9223372036854775807", "DECR k"}},
	{"string-float", []string{"INCRBYFLOAT k 0.1", "INCRBYFLOAT k 0.2"}},
	{"string-far-expiry", []string{"SET k v", "PEXPIREAT k 9223372036854775806"}},
	{"list", []string{`RPUSH k a "" ccc`, "LPUSH k z"}},
	{"hash", []string{"HSET k b 2 a 1", "HINCRBY k n -5", "HDEL k b", "HSET k b 3"}},
	{"hash-large", []string{"HSET k " + pairs("f", 600), "HDEL k f7"}},
	{"zset", []string{"ZADD k 1.5 b 1.5 a -inf c inf d 0 e"}},
	{"zset-skiplist", []string{"ZADD k -0 e 2 " + strings.Repeat("m", 70), "ZADD k " + scorePairs(200)}},
}

func pairs(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s%d %d ", prefix, i, i%7)
	}
	return strings.TrimSpace(b.String())
}

func scorePairs(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d.25 m%d ", i%7, i)
	}
	return strings.TrimSpace(b.String())
}

// build runs cmds on a fresh keyspace and returns the keyspace.
func build(t *testing.T, cmds []string) *memkeys.Keyspace {
	ks := memkeys.New()
	ks.SetNow(testEpoch)
	for _, c := range cmds {
		if r := values.Exec(ks, testEpoch, 2, args(t, c)); r.IsError() {
			t.Fatalf("%s: %v", c, r)
		}
	}
	return ks
}

// describe reads everything a value holds through commands.
func describe(t *testing.T, ks *memkeys.Keyspace) string {
	var out []string
	for _, c := range []string{"TYPE k", "GET k", "LRANGE k 0 -1", "HGETALL k", "ZRANGE k 0 -1 WITHSCORES", "PEXPIRETIME k"} {
		out = append(out, values.Exec(ks, testEpoch, 2, args(t, c)).String())
	}
	return strings.Join(out, "\n")
}

// TestGoldenEncodings checks that each fixture of every format decodes to
// the value its commands build, and that the current format encodes that
// value to exactly the fixture's bytes.
func TestGoldenEncodings(t *testing.T) {
	for _, g := range goldenValues {
		ks := build(t, g.cmds)
		e := ks.Lookup([]byte("k"))
		enc := values.AppendValue(nil, e.Value)
		path := filepath.Join("testdata", "golden", goldenFormat, g.name+".bin")
		if *updateGolden {
			if err := os.WriteFile(path, enc, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fixture, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update-golden once to create it)", g.name, err)
		}
		if !bytes.Equal(enc, fixture) {
			t.Errorf("%s: encodes to %x, fixture %x", g.name, enc, fixture)
		}
		v, n, err := values.DecodeValue(fixture)
		if err != nil || n != len(fixture) {
			t.Fatalf("%s: decode: %v (%d of %d bytes)", g.name, err, n, len(fixture))
		}
		back := memkeys.New()
		back.SetNow(testEpoch)
		back.Put([]byte("k"), v, e.Expires)
		if got, want := describe(t, back), describe(t, ks); got != want {
			t.Errorf("%s: decodes to\n%s\nwant\n%s", g.name, got, want)
		}
		if err := back.Err(); err != nil {
			t.Errorf("%s: %v", g.name, err)
		}
	}
	// Every format's fixtures still decode.
	dirs, _ := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.bin"))
	for _, path := range dirs {
		b, _ := os.ReadFile(path)
		if _, _, err := values.DecodeValue(b); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// TestDecodeRefusesDamage cuts and flips every fixture and checks that
// DecodeValue refuses or decodes a consistent value, never panics.
func TestDecodeRefusesDamage(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "golden", goldenFormat, "*.bin"))
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	for _, path := range paths {
		b, _ := os.ReadFile(path)
		step := max(1, len(b)/256) // every cut of a small fixture, 256 of a large one
		for cut := 0; cut < len(b); cut += step {
			if _, _, err := values.DecodeValue(b[:cut]); !errors.Is(err, values.ErrCorrupt) {
				t.Errorf("%s cut at %d: %v", path, cut, err)
			}
		}
		for i := range min(len(b), 64) {
			d := bytes.Clone(b)
			d[i] ^= 0x5a
			checkDecoded(t, d)
		}
	}
	for _, b := range [][]byte{nil, {0}, {0x7f}, {0x05, 1, 200, 1}, {0x03, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, _, err := values.DecodeValue(b); !errors.Is(err, values.ErrCorrupt) {
			t.Errorf("%x: %v", b, err)
		}
	}
}

// checkDecoded decodes b and, if that succeeds, checks the value's
// invariants and that its encoding decodes to the same encoding.
func checkDecoded(t testing.TB, b []byte) {
	v, n, err := values.DecodeValue(b)
	if err != nil {
		if !errors.Is(err, values.ErrCorrupt) {
			t.Fatalf("%x: error %v is not ErrCorrupt", b, err)
		}
		return
	}
	if n <= 0 || n > len(b) {
		t.Fatalf("%x: took %d bytes", b, n)
	}
	if err := v.Verify(); err != nil {
		t.Fatalf("%x: %v", b, err)
	}
	enc := values.AppendValue(nil, v)
	v2, n2, err := values.DecodeValue(enc)
	if err != nil || n2 != len(enc) || !bytes.Equal(values.AppendValue(nil, v2), enc) {
		t.Fatalf("%x: re-encoding %x does not decode back: %v", b, enc, err)
	}
}

// FuzzDecodeValue feeds DecodeValue garbage: it must never panic, and a
// value it accepts must be consistent and encode stably.
func FuzzDecodeValue(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.bin"))
	for _, path := range paths {
		if b, err := os.ReadFile(path); err == nil && len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecoded(t, b) })
}
