package shards

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/redisfuzz"
	"github.com/rlserver/rlserver/values"
)

// vexec runs one command of package values on s at now, with its keys'
// shards locked (every shard for a command on every key), as the server
// does.
func vexec(t testing.TB, s *Store, now int64, args ...string) values.Reply {
	t.Helper()
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
	cmd := values.Lookup(bargs[0])
	if cmd == nil {
		t.Fatalf("no command %q", args[0])
	}
	plan := TxPlan{All: cmd.Flags&values.AllKeys != 0}
	if cmd.FirstKey > 0 {
		last := cmd.LastKey
		if last < 0 {
			last += len(bargs)
		}
		for i := cmd.FirstKey; i <= last && i < len(bargs); i += max(cmd.KeyStep, 1) {
			plan.Keys = append(plan.Keys, bargs[i])
		}
	}
	var r values.Reply
	s.Transact(plan, func(tx *Tx) {
		k := tx.Keys(now)
		r = k.Exec(2, bargs)
	})
	return r
}

// show renders a reply for comparisons and messages.
func show(r values.Reply) string {
	switch r.Kind {
	case values.Nil, values.NilArray:
		return "(nil)"
	case values.Int:
		return fmt.Sprint(r.Int)
	case values.Array, values.Map:
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case values.Error:
		return "-" + string(r.Str)
	}
	return string(r.Str)
}

// valueScript writes one value of every type, some with an expiry, and a
// limiter key.
func valueScript(t *testing.T, s *Store, now int64) {
	t.Helper()
	for _, cmd := range [][]string{
		{"SET", "s", "hello"},
		{"SET", "n", "10", "PX", "60000"},
		{"INCRBY", "n", "5"},
		{"RPUSH", "l", "a", "b", "c"},
		{"HSET", "h", "f1", "1", "f2", "2"},
		{"ZADD", "z", "1", "one", "2.5", "two", "3", "three"},
		{"PEXPIRE", "z", "120000"},
		{"SET", "gone", "x", "PX", "10"},
	} {
		if r := vexec(t, s, now, cmd...); r.Kind == values.Error {
			t.Fatalf("%v: %s", cmd, r.Str)
		}
	}
	if _, err := s.Check([]byte("rl"), engine.Token, engine.Params{Limit: 10, Window: 60 * sec}, 1, now); err != nil {
		t.Fatal(err)
	}
}

// reads are the commands whose replies show a store's values.
var reads = [][]string{
	{"GET", "s"}, {"GET", "n"}, {"PTTL", "n"}, {"LRANGE", "l", "0", "-1"}, {"HGETALL", "h"},
	{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, {"PTTL", "z"}, {"GET", "gone"}, {"TYPE", "rl"}, {"DBSIZE"},
}

func readAll(t *testing.T, s *Store, now int64) string {
	var b strings.Builder
	for _, r := range reads {
		fmt.Fprintf(&b, "%v=%s\n", r, show(vexec(t, s, now, r...)))
	}
	return b.String()
}

// TestValuesReplicateThroughJournal: a replica that applies the journal's
// records (at the time the leader stamped them) holds the same values,
// with their expiries, as the leader; the snapshot's records do the same.
func TestValuesReplicateThroughJournal(t *testing.T) {
	now := int64(1_800_000_000) * sec
	leader := New(8)
	leader.EnableJournal()
	valueScript(t, leader, now)
	recs, n := leader.AppendChanges(nil)
	if n == 0 {
		t.Fatal("the journal recorded nothing")
	}
	replica := New(4)
	if _, err := replica.ApplyRecords(recs, now); err != nil {
		t.Fatal(err)
	}
	later := now + 20*1e6 // "gone" (10 ms) has expired
	want := readAll(t, leader, later)
	if got := readAll(t, replica, later); got != want {
		t.Fatalf("replica:\n%s\nleader:\n%s", got, want)
	}
	if leader.Digest(later) != replica.Digest(later) {
		t.Fatal("digests differ")
	}
	for _, want := range []string{"[GET s]=hello", "[GET n]=15", "[LRANGE l 0 -1]=[a b c]", "[GET gone]=(nil)", "[TYPE rl]=rl-token", "[DBSIZE]=6"} {
		if !strings.Contains(readAll(t, replica, later), want+"\n") {
			t.Errorf("replica lacks %s:\n%s", want, readAll(t, replica, later))
		}
	}

	snap := New(16)
	for i := 0; i < leader.Shards(); i++ {
		b, _ := leader.AppendShard(i, nil, later)
		if _, err := snap.ApplyRecords(b, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, snap, later); got != want {
		t.Fatalf("restored from a snapshot:\n%s\nleader:\n%s", got, want)
	}
}

// TestValueChangesAreJournaledOnce: a command that changes one key is
// journaled as the command (a ZADD to a long log costs a ZADD), and a
// deletion and a replacement by limiter state (and back) reach the
// replica in order.
func TestValueChangesAreJournaledOnce(t *testing.T) {
	now := int64(1_800_000_000) * sec
	leader := New(4)
	leader.EnableJournal()
	replica := New(4)
	sync := func() int {
		recs, n := leader.AppendChanges(nil)
		if _, err := replica.ApplyRecords(recs, now); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := 0; i < 1000; i++ {
		vexec(t, leader, now, "ZADD", "log", fmt.Sprint(i), fmt.Sprint("m", i))
	}
	sync()
	// One more entry in a log of a thousand is a record of the ZADD, not
	// of the thousand entries.
	vexec(t, leader, now, "ZADD", "log", "1000", "m1000")
	recs, n := leader.AppendChanges(nil)
	if n != 1 || len(recs) > 64 {
		t.Fatalf("one ZADD to a log of 1000 wrote %d records of %d bytes, want one small record", n, len(recs))
	}
	if _, err := replica.ApplyRecords(recs, now); err != nil {
		t.Fatal(err)
	}
	if got := show(vexec(t, replica, now, "ZCARD", "log")); got != "1001" {
		t.Fatalf("replica's ZCARD = %s", got)
	}
	vexec(t, leader, now, "ZREMRANGEBYRANK", "log", "100", "-1")
	sync()
	if got := show(vexec(t, replica, now, "ZCARD", "log")); got != "100" {
		t.Fatalf("replica's ZCARD = %s", got)
	}
	if got := show(vexec(t, replica, now, "ZCARD", "log")); got != "100" {
		t.Fatalf("replica's ZCARD = %s", got)
	}
	// The key becomes limiter state, then a value again, then is deleted.
	vexec(t, leader, now, "DEL", "log")
	leader.Check([]byte("log"), engine.Fixed, engine.Params{Limit: 5, Window: sec}, 1, now)
	sync()
	if got := show(vexec(t, replica, now, "TYPE", "log")); got != "rl-fixed" {
		t.Fatalf("replica's TYPE log = %s, want rl-fixed", got)
	}
	// SET does not overwrite limiter state (WRONGTYPE, as every command
	// on values); after a DEL it writes the key.
	if r := vexec(t, leader, now, "SET", "log", "v"); r.Kind != values.Error {
		t.Fatalf("SET on limiter state = %s, want WRONGTYPE", show(r))
	}
	vexec(t, leader, now, "DEL", "log")
	vexec(t, leader, now, "SET", "log", "v")
	sync()
	if got := show(vexec(t, replica, now, "GET", "log")); got != "v" {
		t.Fatalf("replica's GET log = %s, want v", got)
	}
	vexec(t, leader, now, "DEL", "log")
	sync()
	if replica.Len() != 0 {
		t.Fatalf("replica holds %d keys after DEL", replica.Len())
	}
}

// TestValuesAndLimiterStateRefuseEachOther: a limiter command on a value's
// key is WRONGTYPE, and so is a value command on limiter state; the
// commands on any key see both.
func TestValuesAndLimiterStateRefuseEachOther(t *testing.T) {
	now := int64(1_800_000_000) * sec
	s := New(4)
	vexec(t, s, now, "SET", "v", "1")
	p := engine.Params{Limit: 5, Window: sec}
	_, err := s.Check([]byte("v"), engine.Fixed, p, 1, now)
	var vt *ValueTypeError
	if !errors.As(err, &vt) || !errors.Is(err, ErrWrongType) || !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
		t.Fatalf("RL.CHECK on a string: %v", err)
	}
	if _, err := s.Check([]byte("v"), engine.Fixed, p, 0, now); !errors.Is(err, ErrWrongType) {
		t.Fatalf("RL.PEEK on a string: %v", err)
	}
	if _, err := s.Throttle([]byte("v"), 5, 10, 60, 1, now); !errors.Is(err, ErrWrongType) {
		t.Fatalf("CL.THROTTLE on a string: %v", err)
	}
	if ok, err := s.CheckAll([]Op{{Key: []byte("v"), Algo: engine.Fixed, Params: p, Replace: true}}, 1, now); ok || !errors.Is(err, ErrWrongType) {
		t.Fatalf("a rule's counter on a string: %v %v", ok, err)
	}
	s.Check([]byte("rl"), engine.Fixed, p, 1, now)
	for _, cmd := range [][]string{{"GET", "rl"}, {"INCR", "rl"}, {"LPUSH", "rl", "x"}, {"ZADD", "rl", "1", "m"}, {"HSET", "rl", "f", "v"}} {
		if r := vexec(t, s, now, cmd...); r.Kind != values.Error || !strings.HasPrefix(string(r.Str), "WRONGTYPE") {
			t.Errorf("%v on limiter state = %s, want WRONGTYPE", cmd, show(r))
		}
	}
	if got := show(vexec(t, s, now, "EXISTS", "rl", "v", "none")); got != "2" {
		t.Errorf("EXISTS rl v none = %s", got)
	}
	if got := show(vexec(t, s, now, "DEL", "rl", "v")); got != "2" || s.Len() != 0 {
		t.Errorf("DEL rl v = %s, %d keys left", got, s.Len())
	}
}

// TestValuesExpireAndSweep: an expired value is absent and Sweep drops it.
func TestValuesExpireAndSweep(t *testing.T) {
	now := int64(1_800_000_000) * sec
	s := New(2)
	for i := 0; i < 50; i++ {
		vexec(t, s, now, "SET", fmt.Sprint("k", i), "x", "PX", "100")
	}
	vexec(t, s, now, "SET", "kept", "x")
	if s.Len() != 51 {
		t.Fatalf("Len = %d", s.Len())
	}
	later := now + 200*1e6
	if got := show(vexec(t, s, later, "GET", "k1")); got != "(nil)" {
		t.Fatalf("GET after expiry = %s", got)
	}
	s.Sweep(later, 1000)
	if s.Len() != 1 || s.MemoryBytes() <= 0 {
		t.Fatalf("after Sweep: Len %d, memory %d", s.Len(), s.MemoryBytes())
	}
}

// TestValuesUnderMaxMemory: values count under the bound; under
// volatile-ttl the values nearest their expiry are evicted, values without
// an expiry are not, and once only those are left a command that would
// grow memory gets OOM; noeviction refuses growth at once.
func TestValuesUnderMaxMemory(t *testing.T) {
	now := int64(1_800_000_000) * sec
	s := NewStore(Options{Shards: 1, MaxMemory: 64 << 10})
	for i := 0; i < 2000; i++ {
		if r := vexec(t, s, now, "SET", fmt.Sprint("t", i), strings.Repeat("x", 100), "PX", fmt.Sprint(1000+i)); r.Kind == values.Error {
			t.Fatalf("SET with a TTL under volatile-ttl: %s", r.Str)
		}
	}
	if m := s.MemoryBytes(); m > 64<<10+4096 {
		t.Fatalf("memory %d is above the bound", m)
	}
	if s.Evicted() == 0 {
		t.Fatal("nothing was evicted")
	}
	if got := show(vexec(t, s, now, "GET", "t1999")); got == "(nil)" {
		t.Fatal("the value expiring last was evicted")
	}
	var oom values.Reply
	for i := 0; i < 2000 && oom.Kind != values.Error; i++ {
		oom = vexec(t, s, now, "SET", fmt.Sprint("p", i), strings.Repeat("x", 100))
	}
	if oom.Kind != values.Error || !strings.HasPrefix(string(oom.Str), "OOM ") {
		t.Fatalf("values without an expiry filled memory with no OOM: %s", show(oom))
	}
	if got := show(vexec(t, s, now, "GET", "p0")); got == "(nil)" {
		t.Fatal("a value without an expiry was evicted")
	}

	ne := NewStore(Options{Shards: 1, MaxMemory: 16 << 10, Policy: NoEviction})
	var r values.Reply
	for i := 0; i < 1000 && r.Kind != values.Error; i++ {
		r = vexec(t, ne, now, "RPUSH", "list", strings.Repeat("y", 100))
	}
	if r.Kind != values.Error || !strings.HasPrefix(string(r.Str), "OOM ") {
		t.Fatalf("noeviction: %s", show(r))
	}
	if got := show(vexec(t, ne, now, "LLEN", "list")); got == "0" {
		t.Fatal("noeviction dropped the list")
	}
}

// TestFlushForgetsValues: FLUSHALL drops values and the journal says so.
func TestFlushForgetsValues(t *testing.T) {
	now := int64(1_800_000_000) * sec
	s := New(4)
	s.EnableJournal()
	valueScript(t, s, now)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 || s.MemoryBytes() != 0 {
		t.Fatalf("after Flush: %d keys, %d bytes", s.Len(), s.MemoryBytes())
	}
	replica := New(4)
	valueScript(t, replica, now)
	recs, _ := s.AppendChanges(nil)
	if _, err := replica.ApplyRecords(recs, now); err != nil {
		t.Fatal(err)
	}
	if replica.Len() != 0 {
		t.Fatalf("replica holds %d keys after the flush's records", replica.Len())
	}
}

// TestValuesReplicaMatchesRandomCommands: random commands on every type
// (internal/redisfuzz: collisions of types, expiries, bad arguments), run
// on a journaled leader at moving times, some under a memory bound that
// evicts; the journal's records, collected after random stretches (some
// long enough for the journal to turn lazy), applied to a replica with
// another shard count, leave it with the same state at every collection.
func TestValuesReplicaMatchesRandomCommands(t *testing.T) {
	rng := newRand(t)
	for _, bound := range []int64{0, 48 << 10} {
		leader := NewStore(Options{Shards: 4, MaxMemory: bound})
		leader.EnableJournal()
		replica := New(16)
		gen := redisfuzz.New(rng.Uint64())
		now := int64(1_800_000_000) * sec
		var lastRecs []byte
		for round := 0; round < 60; round++ {
			n := rng.IntN(200)
			if round%10 == 9 {
				n = 3000 // past maxEager: the journal turns lazy
			}
			for i := 0; i < n; i++ {
				now += rng.Int64N(3e6)
				cmd := gen.Next()
				if name := strings.ToLower(string(cmd[0])); name == "flushall" || values.Lookup(cmd[0]) == nil {
					continue
				}
				args := make([]string, len(cmd))
				for j, a := range cmd {
					args[j] = string(a)
				}
				vexec(t, leader, now, args...)
			}
			recs, _ := leader.AppendChanges(nil)
			if _, err := replica.ApplyRecords(recs, now); err != nil {
				t.Fatal(err)
			}
			if a, b := leader.Digest(now), replica.Digest(now); a != b {
				t.Fatalf("bound %d, round %d: the replica's digest differs after %d bytes of records (previous %d)",
					bound, round, len(recs), len(lastRecs))
			}
			lastRecs = recs
		}
	}
}

// TestSmallValuesAreJournaledAsState: a script's INCRBY then PEXPIRE of a
// counter, in one transaction, is one record of the counter's state, not
// two records of the commands; a later SET of the same key in another
// transaction is a record of its own; and the replica ends with the same
// values and expiries.
func TestSmallValuesAreJournaledAsState(t *testing.T) {
	now := int64(1_800_000_000) * sec
	leader := New(4)
	leader.EnableJournal()
	replica := New(4)
	key := []byte("limiter:key:000000012345")
	run := func(cmds ...[]string) {
		leader.Transact(TxPlan{Keys: [][]byte{key}, Script: true}, func(tx *Tx) {
			k := tx.Keys(now)
			for _, c := range cmds {
				args := make([][]byte, len(c))
				for i, a := range c {
					args[i] = []byte(a)
				}
				if r := k.Exec(2, args); r.Kind == values.Error {
					t.Fatalf("%v: %s", c, show(r))
				}
			}
		})
	}
	k := string(key)
	run([]string{"incrby", k, "1"}, []string{"pexpire", k, "60000"})
	recs, n := leader.AppendChanges(nil)
	if n != 1 || len(recs) > 48 {
		t.Fatalf("INCRBY and PEXPIRE in one run wrote %d records of %d bytes, want one of at most 48", n, len(recs))
	}
	if _, err := replica.ApplyRecords(recs, now); err != nil {
		t.Fatal(err)
	}
	run([]string{"incrby", k, "1"}, []string{"pttl", k})
	run([]string{"set", k, "1.5", "EX", "7"})
	recs, n = leader.AppendChanges(nil)
	if n != 2 {
		t.Fatalf("two runs that each changed the key wrote %d records, want 2", n)
	}
	if _, err := replica.ApplyRecords(recs, now); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"GET", k}, {"PTTL", k}} {
		if a, b := show(vexec(t, leader, now, c...)), show(vexec(t, replica, now, c...)); a != b {
			t.Fatalf("%v: leader %s, replica %s", c, a, b)
		}
	}
}

// TestValuesReplicaMatchesRandomScripts: transactions of several random
// commands each, as scripts run them (one keyspace, so that a key's state
// record may replace the one an earlier command of the run wrote, and a
// command may follow a state record with a record of itself), leave the
// replica with the leader's state.
func TestValuesReplicaMatchesRandomScripts(t *testing.T) {
	rng := newRand(t)
	leader := New(4)
	leader.EnableJournal()
	replica := New(16)
	gen := redisfuzz.New(rng.Uint64())
	now := int64(1_800_000_000) * sec
	for round := 0; round < 60; round++ {
		for run := rng.IntN(60); run > 0; run-- {
			now += rng.Int64N(3e6)
			leader.Transact(TxPlan{All: true, Script: true}, func(tx *Tx) {
				k := tx.Keys(now)
				for c := 1 + rng.IntN(5); c > 0; c-- {
					cmd := gen.Next()
					if name := strings.ToLower(string(cmd[0])); name == "flushall" || values.Lookup(cmd[0]) == nil {
						continue
					}
					k.Exec(2, cmd)
				}
			})
		}
		recs, _ := leader.AppendChanges(nil)
		if _, err := replica.ApplyRecords(recs, now); err != nil {
			t.Fatal(err)
		}
		if a, b := leader.Digest(now), replica.Digest(now); a != b {
			t.Fatalf("round %d: the replica's digest differs after %d bytes of records", round, len(recs))
		}
	}
}

// TestReplayedCommandRunsAtItsTime: a command journaled as itself is
// replayed at the time it ran, even after a state record of the same
// collection (applied at the collection's time) moved the replica's
// clock past the command's keys' expiry.
func TestReplayedCommandRunsAtItsTime(t *testing.T) {
	const ms = sec / 1000
	t0 := int64(1_800_000_000) * sec
	leader := New(1)
	leader.EnableJournal()
	replica := New(1)
	vexec(t, leader, t0, "RPUSH", "j", "a")
	vexec(t, leader, t0, "PEXPIRE", "j", "100")
	if _, err := leader.Check([]byte("l"), engine.Fixed, engine.Params{Limit: 5, Window: sec}, 1, t0+ms); err != nil {
		t.Fatal(err)
	}
	vexec(t, leader, t0+2*ms, "RPUSH", "j", "b")
	recs, _ := leader.AppendChanges(nil)
	now := t0 + sec // j has expired
	if _, err := replica.ApplyRecords(recs, now); err != nil {
		t.Fatal(err)
	}
	if a, b := show(vexec(t, leader, now, "TYPE", "j")), show(vexec(t, replica, now, "TYPE", "j")); a != b {
		t.Fatalf("TYPE j: leader %s, replica %s", a, b)
	}
}
