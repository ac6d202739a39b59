package memkeys

import (
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/values"
)

// TestScanVisitsStayingKeysOnce deletes and adds keys between the calls
// of an iteration: every key there throughout is visited exactly once.
func TestScanVisitsStayingKeysOnce(t *testing.T) {
	k := New()
	for i := range 100 {
		k.Put([]byte("k"+strconv.Itoa(i)), values.NewString([]byte("v")), 0)
	}
	seen := map[string]int{}
	cursor, calls := uint64(0), 0
	for {
		cursor = k.Scan(cursor, 7, func(key []byte, kind string) bool {
			if kind != "string" {
				t.Fatalf("kind %q", kind)
			}
			seen[string(key)]++
			return true
		})
		calls++
		k.Delete([]byte("k" + strconv.Itoa(calls)))                                // may or may not have been seen
		k.Put([]byte("new"+strconv.Itoa(calls)), values.NewString([]byte("v")), 0) // may or may not be seen
		if cursor == 0 {
			break
		}
	}
	for i := calls + 1; i < 100; i++ {
		if n := seen["k"+strconv.Itoa(i)]; n != 1 {
			t.Errorf("k%d visited %d times", i, n)
		}
	}
	if calls < 100/7 {
		t.Errorf("%d calls for 100 keys at 7 a call", calls)
	}
}

func TestExpiryAndOther(t *testing.T) {
	k := New()
	k.SetNow(100)
	k.SetOther("rl", "rl-token", 200)
	k.Put([]byte("s"), values.NewString([]byte("v")), 150)
	if e := k.Lookup([]byte("rl")); e.Other != "rl-token" || e.Expires != 200 || k.Len() != 2 {
		t.Fatalf("rl: %+v, %d keys", e, k.Len())
	}
	k.SetNow(150)
	if k.Lookup([]byte("s")).Exists() || k.Len() != 1 {
		t.Fatal("s is there at its expiry")
	}
	k.SetNow(200)
	if k.Delete([]byte("rl")) {
		t.Fatal("an expired key was deleted")
	}
}
