package values_test

import (
	"testing"

	"github.com/rlserver/rlserver/internal/redistest"
)

// allTables is every table of the command tests.
func allTables() [][]table {
	return [][]table{stringTables, keyTables, nulTables, listTables, hashTables, zsetTables, resp3Tables, ownTables}
}

// TestTablesMatchRedis runs the command tables on a real redis-server:
// what they want is what Redis 7.0 answers, not only what Exec does.
func TestTablesMatchRedis(t *testing.T) {
	addr := redistest.Start(t)
	for _, tables := range allTables() {
		for _, tb := range tables {
			if !tb.own {
				runTableOnRedis(t, addr, tb)
			}
		}
	}
}
