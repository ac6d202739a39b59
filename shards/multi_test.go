package shards_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/shards"
)

const now0 = int64(1_700_000_040) * 1e9

// peek returns key's allowance without charging it.
func peek(t testing.TB, s *shards.Store, key string, a engine.Algo, p engine.Params, now int64) engine.Result {
	t.Helper()
	r, err := s.Check([]byte(key), a, p, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckAllChargesAllOrNothing(t *testing.T) {
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		t.Run(a.String(), func(t *testing.T) {
			s := shards.New(4)
			wide := engine.Params{Limit: 10, Window: 60e9}
			narrow := engine.Params{Limit: 3, Window: 60e9}
			ops := []shards.Op{{Key: []byte("wide"), Algo: a, Params: wide}, {Key: []byte("narrow"), Algo: a, Params: narrow}}
			admitted := 0
			for i := 0; i < 6; i++ {
				ok, err := s.CheckAll(ops, 1, now0)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					admitted++
				}
				if ok != (ops[0].Result.Allowed && ops[1].Result.Allowed) {
					t.Fatalf("check %d: allowed %v with results %+v", i, ok, ops)
				}
			}
			if admitted != 3 {
				t.Fatalf("admitted %d, want 3", admitted)
			}
			// The denied checks charged nothing: wide has 10-3 left.
			if r := peek(t, s, "wide", a, wide, now0); r.Remaining != 7 {
				t.Fatalf("wide remaining %d after 3 admissions, want 7", r.Remaining)
			}
			// A denied check reports the passing op's current allowance.
			ok, _ := s.CheckAll(ops, 1, now0)
			if ok || !ops[0].Result.Allowed || ops[0].Result.Remaining != 7 || ops[1].Result.Allowed || ops[1].Result.RetryAfter <= 0 {
				t.Fatalf("denied check: %v %+v", ok, ops)
			}
		})
	}
}

func TestCheckAllLogDeniedLeavesRingAlone(t *testing.T) {
	s := shards.New(1) // both keys in one shard
	logP := engine.Params{Limit: 5, Window: 10e9}
	fixP := engine.Params{Limit: 2, Window: 10e9}
	ops := []shards.Op{{Key: []byte("log"), Algo: engine.Log, Params: logP}, {Key: []byte("fix"), Algo: engine.Fixed, Params: fixP}}
	for i := 0; i < 5; i++ {
		s.CheckAll(ops, 1, now0+int64(i)) // distinct times: no merging
	}
	if r := peek(t, s, "log", engine.Log, logP, now0+10); r.Remaining != 3 {
		t.Fatalf("log remaining %d, want 3 (two admissions)", r.Remaining)
	}
	// Same instant as the last admission: Push would merge into the last entry.
	s2 := shards.New(1)
	for i := 0; i < 4; i++ {
		s2.CheckAll(ops, 1, now0)
	}
	if r := peek(t, s2, "log", engine.Log, logP, now0); r.Remaining != 3 {
		t.Fatalf("log remaining %d, want 3", r.Remaining)
	}
}

func TestCheckAllShadowNeverDenies(t *testing.T) {
	s := shards.New(4)
	p := engine.Params{Limit: 2, Window: 60e9}
	ops := []shards.Op{
		{Key: []byte("enforce"), Algo: engine.Fixed, Params: engine.Params{Limit: 5, Window: 60e9}},
		{Key: []byte("shadow"), Algo: engine.Fixed, Params: p, Shadow: true},
	}
	for i := 0; i < 5; i++ {
		ok, err := s.CheckAll(ops, 1, now0)
		if err != nil || !ok {
			t.Fatalf("check %d denied: %v", i, err)
		}
		if wantShadow := i < 2; ops[1].Result.Allowed != wantShadow {
			t.Fatalf("check %d: shadow allowed %v, want %v", i, ops[1].Result.Allowed, wantShadow)
		}
	}
	if ok, _ := s.CheckAll(ops, 1, now0); ok {
		t.Fatal("sixth check allowed past the enforcing limit of 5")
	}
	if r := peek(t, s, "shadow", engine.Fixed, p, now0); r.Remaining != 0 {
		t.Fatalf("shadow counter remaining %d", r.Remaining)
	}
}

func TestCheckAllWrongType(t *testing.T) {
	s := shards.New(4)
	p := engine.Params{Limit: 5, Window: 60e9}
	if _, err := s.Check([]byte("k"), engine.Token, p, 1, now0); err != nil {
		t.Fatal(err)
	}
	ops := []shards.Op{{Key: []byte("other"), Algo: engine.Fixed, Params: p}, {Key: []byte("k"), Algo: engine.Fixed, Params: p}}
	if _, err := s.CheckAll(ops, 1, now0); !errors.Is(err, shards.ErrWrongType) {
		t.Fatalf("got %v, want WRONGTYPE", err)
	}
	if r := peek(t, s, "other", engine.Fixed, p, now0); r.Remaining != 5 {
		t.Fatal("a WRONGTYPE multi-check charged another key")
	}
	ops[1].Replace = true
	if ok, err := s.CheckAll(ops, 1, now0); !ok || err != nil || ops[1].Result.Remaining != 4 {
		t.Fatalf("Replace: %v %v %+v", ok, err, ops[1].Result)
	}
	if r := peek(t, s, "k", engine.Fixed, p, now0); r.Remaining != 4 {
		t.Fatalf("k was not replaced by fixed state: %+v", r)
	}
	dup := []shards.Op{{Key: []byte("a"), Algo: engine.Fixed, Params: p}, {Key: []byte("a"), Algo: engine.Fixed, Params: p}}
	if _, err := s.CheckAll(dup, 1, now0); !errors.Is(err, shards.ErrDuplicateKey) {
		t.Fatalf("duplicate keys: %v", err)
	}
}

func TestCheckAllDoesNotAllocate(t *testing.T) {
	s := shards.New(16)
	ops := make([]shards.Op, 4)
	for i := range ops {
		ops[i] = shards.Op{Key: []byte(fmt.Sprint("key", i)), Algo: engine.Algo(1 + i), Params: engine.Params{Limit: 1 << 40, Window: 60e9}}
	}
	s.CheckAll(ops, 1, now0)
	n := testing.AllocsPerRun(1000, func() {
		if ok, err := s.CheckAll(ops, 1, now0); !ok || err != nil {
			t.Fatal("denied")
		}
	})
	if n != 0 {
		t.Fatalf("CheckAll allocates %v times per call", n)
	}
}

// TestCheckAllOwnCost: ops with OwnCost charge their own cost (0 only
// looks), all or nothing, and RefundAll gives each its own cost back.
func TestCheckAllOwnCost(t *testing.T) {
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		t.Run(a.String(), func(t *testing.T) {
			s := shards.New(4)
			p := engine.Params{Limit: 10, Window: 60e9}
			ops := []shards.Op{
				{Key: []byte("three"), Algo: a, Params: p, OwnCost: true, Cost: 3},
				{Key: []byte("look"), Algo: a, Params: p, OwnCost: true, Cost: 0},
				{Key: []byte("call"), Algo: a, Params: p},
			}
			if ok, err := s.CheckAll(ops, 2, now0); err != nil || !ok {
				t.Fatalf("first check: %v %v", ok, err)
			}
			for key, want := range map[string]int64{"three": 7, "look": 10, "call": 8} {
				if r := peek(t, s, key, a, p, now0); r.Remaining != want {
					t.Fatalf("%s: remaining %d, want %d", key, r.Remaining, want)
				}
			}
			// 3 more of 7 fit "three", but 9 do not fit "call": nothing is charged.
			ops[2].OwnCost, ops[2].Cost = true, 9
			if ok, err := s.CheckAll(ops, 2, now0); err != nil || ok || ops[2].Result.Allowed {
				t.Fatalf("check over call's limit: %v %v %+v", ok, err, ops[2].Result)
			}
			if r := peek(t, s, "three", a, p, now0); r.Remaining != 7 {
				t.Fatalf("three charged by a denied check: remaining %d", r.Remaining)
			}
			ops[2].Cost = 1
			if ok, err := s.CheckAll(ops, 2, now0); err != nil || !ok {
				t.Fatalf("third check: %v %v", ok, err)
			}
			if err := s.RefundAll(ops, 2, now0, now0); err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string]int64{"three": 7, "look": 10, "call": 8} {
				if r := peek(t, s, key, a, p, now0); r.Remaining != want {
					t.Fatalf("after refund %s: remaining %d, want %d", key, r.Remaining, want)
				}
			}
		})
	}
}
