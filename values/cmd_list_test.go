package values_test

import "testing"

var listTables = []table{
	{name: "push pop", steps: []step{
		{"LPUSH l a b", ":2"},
		{"RPUSH l c", ":3"},
		{"LRANGE l 0 -1", `["b" "a" "c"]`},
		{"LPOP l", `"b"`},
		{"RPOP l", `"c"`},
		{"LPOP l 0", "[]"},
		{"LPOP l -1", "-ERR value is out of range, must be positive"},
		{"LPOP l abc", "-ERR value is out of range, must be positive"},
		{"LPOP l 1 2", "-ERR wrong number of arguments for 'lpop' command"},
		{"RPUSH l b c d", ":4"},
		{"RPOP l 2", `["d" "c"]`},
		{"LPOP l 5", `["a" "b"]`},
		{"EXISTS l", ":0"},
		{"LPOP l", "(nil)"},
		{"LPOP l 2", "(nil array)"},
		{"LPOP l 0", "(nil array)"},
		{"RPOP l -1", "-ERR value is out of range, must be positive"},
		{"LPUSH", "-ERR wrong number of arguments for 'lpush' command"},
		{"LPUSH l", "-ERR wrong number of arguments for 'lpush' command"},
		{"SET s v", "+OK"},
		{"LPUSH s x", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"LPOP s", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"LPOP s -1", "-ERR value is out of range, must be positive"},
	}},
	{name: "range index trim len", steps: []step{
		{"RPUSH l a b c d e", ":5"},
		{"LLEN l", ":5"},
		{"LLEN nokey", ":0"},
		{"LRANGE l 1 2", `["b" "c"]`},
		{"LRANGE l -2 -1", `["d" "e"]`},
		{"LRANGE l -100 100", `["a" "b" "c" "d" "e"]`},
		{"LRANGE l 3 1", "[]"},
		{"LRANGE l 5 10", "[]"},
		{"LRANGE l a 1", "-ERR value is not an integer or out of range"},
		{"LRANGE nokey 0 -1", "[]"},
		{"LRANGE nokey x 1", "-ERR value is not an integer or out of range"},
		{"LINDEX l 0", `"a"`},
		{"LINDEX l -1", `"e"`},
		{"LINDEX l 5", "(nil)"},
		{"LINDEX l -6", "(nil)"},
		{"LINDEX l x", "-ERR value is not an integer or out of range"},
		{"LINDEX nokey x", "(nil)"},
		{"LTRIM l 1 -2", "+OK"},
		{"LRANGE l 0 -1", `["b" "c" "d"]`},
		{"LTRIM l -1 100", "+OK"},
		{"LRANGE l 0 -1", `["d"]`},
		{"LTRIM l x 1", "-ERR value is not an integer or out of range"},
		{"LTRIM nokey 0 1", "+OK"},
		{"LTRIM l 1 0", "+OK"},
		{"EXISTS l", ":0"},
		{"SET s v", "+OK"},
		{"LRANGE s 0 -1", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"LLEN s", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"LINDEX s x", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"LTRIM s 0 1", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
	}},
}

func TestListCommands(t *testing.T) {
	for _, tb := range listTables {
		runTable(t, tb)
	}
}
