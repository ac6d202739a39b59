package slots

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/redistest"
)

// TestOf checks keys whose slots Redis's documentation gives, or that a
// redis-server 7 in cluster mode answered to CLUSTER KEYSLOT.
func TestOf(t *testing.T) {
	for _, c := range []struct {
		key  string
		want int
	}{
		// The cluster specification: CRC16 of "123456789" is 0x31C3.
		{"123456789", 0x31C3},
		{"", 0},
		{"a", 15495},
		{"foo", 12182},
		{"bar", 5061},
		{"hello", 866},
		{"somekey", 11058},
		{"mykey", 14687},
		// The specification's hash tag examples.
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", Of([]byte("foo{}{bar}"))}, // whole key: see TestHashTag
		{"foo{{bar}}zap", Of([]byte("{bar"))},
		{"foo{bar}{zap}", 5061}, // "bar"
		// Edge cases, answered by redis-server 7.0.
		{"{}", 15257},
		{"{", 4092},
		{"}{", 12793},
		{"{a}{b}", 15495}, // "a"
		{"a{}b{c}", 7353}, // the whole key: the first '{' is followed by '}'
		{"{}a", 10875},
		{"a{b", 13340},
		{"a}b{c", 13587},
		{"{{a}}", 10276}, // "{a"
		{"}a{b}", 3300},  // "b"
	} {
		if got := Of([]byte(c.key)); got != c.want {
			t.Errorf("Of(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}

// TestHashTag checks which bytes are hashed.
func TestHashTag(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"", ""},
		{"abc", "abc"},
		{"{}", "{}"},
		{"{", "{"},
		{"}", "}"},
		{"}{", "}{"},
		{"{a}{b}", "a"},
		{"a{}b{c}", "a{}b{c}"},
		{"foo{}{bar}", "foo{}{bar}"},
		{"foo{{bar}}zap", "{bar"},
		{"x{y}", "y"},
		{"{ab", "{ab"},
		{"a}{b}", "b"},
	} {
		if got := string(hashTag([]byte(c.key))); got != c.want {
			t.Errorf("hashTag(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

// TestLikeRedis compares Of with CLUSTER KEYSLOT of a real redis-server
// in cluster mode, for random keys rich in braces. It prints its seed;
// RLSERVER_SLOTS_SEED=n replays one.
func TestLikeRedis(t *testing.T) {
	addr := startClusterRedis(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RLSERVER_SLOTS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	keys := []string{"", "{", "}", "{}", "}{", "{a}{b}", "a{}b{c}", "\x00\xff{\x80}"}
	const alphabet = "ab{}{}x\x00\xff"
	for range 2000 {
		k := make([]byte, rng.IntN(12))
		for i := range k {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, string(k))
	}
	want := keySlots(t, addr, keys)
	for i, k := range keys {
		if got := Of([]byte(k)); got != want[i] {
			t.Errorf("Of(%q) = %d, redis-server says %d", k, got, want[i])
		}
	}
}

// keySlots asks the Redis at addr for the slot of every key, pipelined.
func keySlots(t *testing.T, addr string, keys []string) []int {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&req, "*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$%d\r\n%s\r\n", len(k), k)
	}
	go nc.Write([]byte(req.String()))
	rd := bufio.NewReader(nc)
	out := make([]int, len(keys))
	for i := range keys {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the slot of %q: %v", keys[i], err)
		}
		if out[i], err = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, ":"), "\r\n")); err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q answered %q", keys[i], line)
		}
	}
	return out
}

// startClusterRedis starts a redis-server with cluster support for the
// test and returns its address; it stops it when the test ends. No slot
// needs to be assigned for CLUSTER KEYSLOT.
func startClusterRedis(t *testing.T) string {
	t.Helper()
	return redistest.StartCluster(t)
}

// refOf is a plain reference: Redis's keyHashSlot and a bitwise CRC16.
func refOf(key []byte) int {
	s := 0
	for s < len(key) && key[s] != '{' {
		s++
	}
	if s < len(key) {
		e := s + 1
		for e < len(key) && key[e] != '}' {
			e++
		}
		if e < len(key) && e != s+1 {
			key = key[s+1 : e]
		}
	}
	var crc uint16
	for _, b := range key {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Count
}

func FuzzOf(f *testing.F) {
	for _, k := range []string{"", "{", "}", "{}", "}{", "{a}{b}", "a{}b{c}", "foo{{bar}}zap", "123456789"} {
		f.Add([]byte(k))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		got, want := Of(key), refOf(key)
		if got != want {
			t.Fatalf("Of(%q) = %d, reference %d", key, got, want)
		}
		if got < 0 || got >= Count {
			t.Fatalf("Of(%q) = %d, out of range", key, got)
		}
	})
}

func TestOfAllocatesNothing(t *testing.T) {
	key := []byte("{user1000}.following")
	if n := testing.AllocsPerRun(100, func() { Of(key) }); n != 0 {
		t.Fatalf("Of allocates %v times per call", n)
	}
}

func BenchmarkOf(b *testing.B) {
	for _, key := range []string{"api:user:1234567", "{user1000}.following", strings.Repeat("k", 256)} {
		b.Run(strconv.Itoa(len(key)), func(b *testing.B) {
			k := []byte(key)
			b.ReportAllocs()
			b.SetBytes(int64(len(k)))
			for b.Loop() {
				Of(k)
			}
		})
	}
}
