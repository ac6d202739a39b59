package values_test

import (
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/internal/memkeys"
	"github.com/rlserver/rlserver/values"
)

// benchKeys returns a keyspace for benchmarks: no verification on Put.
func benchKeys() *memkeys.Keyspace {
	ks := memkeys.New()
	ks.Check = false
	ks.SetNow(testEpoch)
	return ks
}

func exec(b *testing.B, ks *memkeys.Keyspace, args ...[]byte) values.Reply {
	r := values.Exec(ks, testEpoch, 2, args)
	if r.IsError() {
		b.Fatalf("%s: %v", args[0], r)
	}
	return r
}

// benchSlidingLog is the sliding-log limiter's step, as the scripts of
// rate-limiting tutorials do it: drop the entries older than the window,
// add this request's, count. The set holds size entries throughout.
func benchSlidingLog(b *testing.B, size int) {
	ks := benchKeys()
	key := []byte("log")
	members := make([][]byte, 2*size)
	for i := range members {
		members[i] = []byte("req-" + strconv.Itoa(i))
	}
	score, floor := make([]byte, 0, 24), make([]byte, 0, 24)
	// The arguments are built once and changed in place, as a server's
	// parsed buffers are: the benchmark measures Exec, not slices.
	zrem := [][]byte{[]byte("ZREMRANGEBYSCORE"), key, []byte("-inf"), nil}
	zadd := [][]byte{[]byte("ZADD"), key, nil, nil}
	zcard := [][]byte{[]byte("ZCARD"), key}
	step := func(i int) {
		floor = strconv.AppendInt(append(floor[:0], '('), int64(i-size+1), 10)
		zrem[3] = floor
		exec(b, ks, zrem...)
		score = strconv.AppendInt(score[:0], int64(i), 10)
		zadd[2], zadd[3] = score, members[i%len(members)]
		exec(b, ks, zadd...)
		exec(b, ks, zcard...)
	}
	for i := range size {
		step(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		step(size + i)
	}
	b.StopTimer()
	if n := exec(b, ks, zcard...).Int; n != int64(size) {
		b.Fatalf("the log holds %d entries, want %d", n, size)
	}
}

func BenchmarkSlidingLog1k(b *testing.B)  { benchSlidingLog(b, 1000) }
func BenchmarkSlidingLog10k(b *testing.B) { benchSlidingLog(b, 10000) }

func BenchmarkIncrBy(b *testing.B) {
	ks := benchKeys()
	args := [][]byte{[]byte("INCRBY"), []byte("counter"), []byte("3")}
	values.Exec(ks, testEpoch, 2, args)
	b.ReportAllocs()
	for b.Loop() {
		values.Exec(ks, testEpoch, 2, args)
	}
}

func BenchmarkHIncrBy(b *testing.B) {
	ks := benchKeys()
	exec(b, ks, []byte("HSET"), []byte("bucket"), []byte("tokens"), []byte("10"), []byte("ts"), []byte("1700000000000"))
	args := [][]byte{[]byte("HINCRBY"), []byte("bucket"), []byte("tokens"), []byte("-1")}
	b.ReportAllocs()
	for b.Loop() {
		values.Exec(ks, testEpoch, 2, args)
	}
}

// BenchmarkFixedWindow is INCR then PEXPIRE ... NX, the fixed window.
func BenchmarkFixedWindow(b *testing.B) {
	ks := benchKeys()
	incr := [][]byte{[]byte("INCR"), []byte("window:42")}
	pexpire := [][]byte{[]byte("PEXPIRE"), []byte("window:42"), []byte("60000"), []byte("NX")}
	b.ReportAllocs()
	for b.Loop() {
		values.Exec(ks, testEpoch, 2, incr)
		values.Exec(ks, testEpoch, 2, pexpire)
	}
}

func BenchmarkGet(b *testing.B) {
	ks := benchKeys()
	exec(b, ks, []byte("SET"), []byte("k"), []byte("1700000000.123"))
	args := [][]byte{[]byte("GET"), []byte("k")}
	b.ReportAllocs()
	for b.Loop() {
		values.Exec(ks, testEpoch, 2, args)
	}
}

func BenchmarkSetPX(b *testing.B) {
	ks := benchKeys()
	args := [][]byte{[]byte("SET"), []byte("k"), []byte("1700000000.123"), []byte("PX"), []byte("60000")}
	b.ReportAllocs()
	for b.Loop() {
		values.Exec(ks, testEpoch, 2, args)
	}
}

func BenchmarkLookup(b *testing.B) {
	name := []byte("ZREMRANGEBYSCORE")
	for b.Loop() {
		values.Lookup(name)
	}
}
