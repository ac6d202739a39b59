package rules

import (
	"strconv"
	"testing"
)

// TestQueryManyIdentifiers: past smallQuery identifiers a Query indexes
// them; duplicates are still refused and every type still found, and
// Reset forgets the index.
func TestQueryManyIdentifiers(t *testing.T) {
	var q Query
	for round := 0; round < 2; round++ {
		q.Reset()
		for i := 0; i < 100; i++ {
			if !q.AddID([]byte("t"+strconv.Itoa(i)), []byte("v"+strconv.Itoa(i))) {
				t.Fatalf("round %d: t%d refused", round, i)
			}
		}
		for _, i := range []int{0, 5, 8, 9, 99} {
			typ := "t" + strconv.Itoa(i)
			if q.AddID([]byte(typ), []byte("again")) {
				t.Fatalf("round %d: duplicate %s accepted", round, typ)
			}
			if v, ok := q.value(typ); !ok || string(v) != "v"+strconv.Itoa(i) {
				t.Fatalf("round %d: value(%s) = %q, %v", round, typ, v, ok)
			}
		}
		if _, ok := q.value("t100"); ok {
			t.Fatal("value of an absent type found")
		}
	}
	q.Reset()
	if _, ok := q.value("t1"); ok || q.index != nil {
		t.Fatal("Reset kept the identifiers' index")
	}
}
