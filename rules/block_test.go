package rules

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRuleBlockField(t *testing.T) {
	old := `{"id":"a","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s","burst":0,"shadow":false}`
	r, err := DecodeJSON([]byte(old))
	if err != nil || r.Block != nil {
		t.Fatalf("an old rule: %+v, %v", r, err)
	}
	if got := string(EncodeJSON(r)); got != old {
		t.Errorf("an old rule encodes as %s, want it unchanged", got)
	}
	with := strings.TrimSuffix(old, "}") + `,"block":{"after":5,"within":"1m","for":"15m"}}`
	r, err = DecodeJSON([]byte(with))
	if err != nil || r.Block == nil || *r.Block != (BlockSpec{After: 5, Within: "1m", For: "15m"}) {
		t.Fatalf("a rule with a block: %+v, %v", r, err)
	}
	if got := string(EncodeJSON(r)); got != with {
		t.Errorf("encodes as %s, want %s", got, with)
	}
	c, err := Compile(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	after, within, dur, ok := c.BlockAfter()
	if !ok || after != 5 || within != int64(time.Minute) || dur != int64(15*time.Minute) {
		t.Errorf("BlockAfter = %d %d %d %v", after, within, dur, ok)
	}
	r.Block.After = 6 // the compiled rule keeps its own copy
	if c.Rule.Block.After != 5 {
		t.Errorf("Compile shares the caller's block")
	}
}

func TestRuleBlockValidation(t *testing.T) {
	base := Rule{ID: "a", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "1s"}
	for _, tc := range []struct {
		b     BlockSpec
		field string
		err   error
	}{
		{BlockSpec{0, "1m", "1m"}, "block.after", ErrBlockAfter},
		{BlockSpec{-1, "1m", "1m"}, "block.after", ErrBlockAfter},
		{BlockSpec{10001, "1m", "1m"}, "block.after", ErrBlockAfter},
		{BlockSpec{1, "", "1m"}, "block.within", ErrBlockDuration},
		{BlockSpec{1, "0", "1m"}, "block.within", ErrBlockDuration},
		{BlockSpec{1, "-1s", "1m"}, "block.within", ErrBlockDuration},
		{BlockSpec{1, "1m", "0ms"}, "block.for", ErrBlockDuration},
		{BlockSpec{1, "1m", "400d"}, "block.for", ErrBlockDuration},
	} {
		r := base
		b := tc.b
		r.Block = &b
		err := r.Validate(0)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, tc.err) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want %s: %v", tc.b, err, tc.field, tc.err)
		}
	}
	r := base
	r.Block = &BlockSpec{10000, "366d", "1ms"}
	if err := r.Validate(0); err != nil {
		t.Errorf("bounds: %v", err)
	}
}

func TestLoadYAMLBlock(t *testing.T) {
	in := `
- id: per-ip
  target: "*"
  tier: "*"
  key_type: ip
  algo: sliding
  limit: 10
  window: 1s
  block:
    after: 3
    within: 1m
    for: 15m
`
	got, err := LoadYAML([]byte(in), 0)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Block, &BlockSpec{3, "1m", "15m"}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for bad, want := range map[string]string{
		"  block: 3\n":                             "block: has the wrong type (line 9: want a mapping",
		"  block:\n    after: x\n":                 "block.after: has the wrong type (line 10: want an integer",
		"  block:\n    later: 3\n":                 "block.later: is not a rule field",
		"  block:\n    after: 0\n    for: 1m\n":    "block.after: must be an integer from 1 to 10000",
		"  block:\n    after: 2\n    within: 1m\n": "block.for: must be a duration",
	} {
		doc := strings.SplitAfter(in, "window: 1s\n")[0] + bad
		if _, err := LoadYAML([]byte(doc), 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", bad, err, want)
		}
	}
}

func TestBlockTable(t *testing.T) {
	var tab *BlockTable
	tab = tab.With(Block{Identifier: "ip=1", Until: 100})
	tab = tab.With(Block{Identifier: "user=u", Until: 50, Reason: "x"})
	q := &Query{}
	q.Reset()
	q.AddID([]byte("user"), []byte("u"))
	q.AddID([]byte("ip"), []byte("1"))
	if b, ok := tab.Find(q, 10); !ok || b.Identifier != "ip=1" {
		t.Errorf("Find picks the longest block: %+v %v", b, ok)
	}
	if b, ok := tab.Find(q, 100); ok {
		t.Errorf("Find at expiry: %+v", b)
	}
	if got := tab.Active(60); len(got) != 1 || got[0].TTL != 40 {
		t.Errorf("Active(60) = %+v", got)
	}
	next, ok := tab.Without("user=u", 60)
	if ok || next.Len() != 1 || tab.Len() != 2 {
		t.Errorf("Without an expired block: %v, %d (the original %d)", ok, next.Len(), tab.Len())
	}
	// Many blocks: Pruned drops the expired ones and leaves t as it was.
	var big *BlockTable
	for i := 0; i < 2000; i++ {
		big = big.With(Block{Identifier: "ip=" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i), Until: int64(i)})
	}
	pruned := big.Pruned(1000)
	if big.Len() != 2000 || pruned.Len() != 999 || len(pruned.All()) != 999 || len(big.Active(1000)) != 999 {
		t.Errorf("Pruned: %d of %d left (All %d)", pruned.Len(), big.Len(), len(pruned.All()))
	}
	if big.Pruned(-1) != big {
		t.Errorf("Pruned with nothing expired copies the table")
	}
	if _, err := NewBlock("ip=1", 0, "", 0); !errors.Is(err, ErrBlockSeconds) || !errors.Is(err, ErrInvalidBlock) {
		t.Errorf("NewBlock 0 s: %v", err)
	}
	if b, err := NewBlock("ip=::1", 2, "why", 5); err != nil || b.Until != 5+2e9 {
		t.Errorf("NewBlock: %+v %v", b, err)
	}
}
