package values_test

import "testing"

// resp3Tables check the shapes RESP3 gives where Redis 7 replies
// differently than in RESP2: doubles, maps, pairs of member and score,
// one null.
var resp3Tables = []table{
	{name: "resp3", resp: 3, steps: []step{
		{"ZADD z 1.5 a 2 b", ":2"},
		{"ZSCORE z a", ",1.5"},
		{"ZSCORE z x", "(nil)"},
		{"ZINCRBY z 1 b", ",3"},
		{"ZADD z INCR 0.1 a", ",1.6000000000000001"},
		{"ZMSCORE z a x", "[,1.6000000000000001 (nil)]"},
		{"ZRANGE z 0 -1 WITHSCORES", `[["a" ,1.6000000000000001] ["b" ,3]]`},
		{"ZRANGE z 0 -1", `["a" "b"]`},
		{"ZREVRANGEBYSCORE z +inf -inf WITHSCORES LIMIT 0 1", `[["b" ,3]]`},
		{"ZADD z inf c", ":1"},
		{"ZSCORE z c", ",inf"},
		{"HSET h f v g w", ":2"},
		{"HGETALL h", `{"f" "v" "g" "w"}`},
		{"HGETALL nokey", "{}"},
		{"HKEYS h", `["f" "g"]`},
		{"INCRBYFLOAT k 1.5", `"1.5"`},
		{"HINCRBYFLOAT h n 1.5", `"1.5"`},
		{"LPOP nokey 2", "(nil)"},
		{"GET nokey", "(nil)"},
		{"SET k v", "+OK"},
		{"TYPE k", "+string"},
	}},
}

func TestRESP3Replies(t *testing.T) {
	for _, tb := range resp3Tables {
		runTable(t, tb)
	}
}
