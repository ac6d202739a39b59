package values_test

import (
	"bytes"
	"testing"

	"github.com/rlserver/rlserver/internal/memkeys"
	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/values"
)

// FuzzExec runs a few commands, each of arbitrary arguments, on a
// keyspace with a value of every kind: Exec must never panic, and must
// leave every value consistent (its recorded size, its structure, no
// empty aggregate stored).
func FuzzExec(f *testing.F) {
	gen := redisfuzz.New(1)
	for range 200 {
		f.Add(bytes.Join(gen.Next(), []byte{0}), bytes.Join(gen.Next(), []byte{0}))
	}
	f.Fuzz(func(t *testing.T, cmd1, cmd2 []byte) {
		ks := memkeys.New()
		ks.SetNow(testEpoch)
		for _, c := range []string{"SET a 1", "RPUSH b x y", "HSET {t}c f 1", "ZADD s0 1 m", "LPUSH l0 1", "HSET h0 f v", "ZADD z0 1 m0 2 m1"} {
			values.Exec(ks, testEpoch, 2, args(t, c))
		}
		for _, cmd := range [][]byte{cmd1, cmd2} {
			a := bytes.Split(cmd, []byte{0})
			for _, resp := range []int{2, 3} {
				values.Exec(ks, testEpoch, resp, a)
			}
			if err := ks.Err(); err != nil {
				t.Fatalf("%q broke the keyspace: %v", a, err)
			}
		}
	})
}
