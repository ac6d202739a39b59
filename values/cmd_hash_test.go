package values_test

import "testing"

var hashTables = []table{
	{name: "set get", steps: []step{
		{"HSET h a 1 b 2", ":2"},
		{"HSET h a 3 c 4", ":1"},
		{"HSET h a", "-ERR wrong number of arguments for 'hset' command"},
		{"HSET h a 1 b", "-ERR wrong number of arguments for 'hset' command"},
		{"HMSET h d 5", "+OK"},
		{"HMSET h d", "-ERR wrong number of arguments for 'hmset' command"},
		{"HSETNX h a 9", ":0"},
		{"HSETNX h e 6", ":1"},
		{"HGET h a", `"3"`},
		{"HGET h z", "(nil)"},
		{"HGET nokey a", "(nil)"},
		{"HMGET h a z b", `["3" (nil) "2"]`},
		{"HMGET nokey a b", "[(nil) (nil)]"},
		{"HGETALL h", `["a" "3" "b" "2" "c" "4" "d" "5" "e" "6"]`},
		{"HKEYS h", `["a" "b" "c" "d" "e"]`},
		{"HVALS h", `["3" "2" "4" "5" "6"]`},
		{"HGETALL nokey", "[]"},
		{"HLEN h", ":5"},
		{"HLEN nokey", ":0"},
		{"HEXISTS h a", ":1"},
		{"HEXISTS h z", ":0"},
		{"HSTRLEN h a", ":1"},
		{"HSTRLEN h z", ":0"},
		{"HDEL h b z", ":1"},
		{"HGETALL h", `["a" "3" "c" "4" "d" "5" "e" "6"]`},
		{"HSET h b 7", ":1"},
		{"HKEYS h", `["a" "c" "d" "e" "b"]`},
		{"HDEL h a b c d e", ":5"},
		{"EXISTS h", ":0"},
		{"HDEL h a", ":0"},
		{"SET s v", "+OK"},
		{"HSET s a 1", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"HGET s a", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"HMGET s a", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"HGETALL s", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
	}},
	{name: "incr", steps: []step{
		{"HINCRBY h n 5", ":5"},
		{"HINCRBY h n -7", ":-2"},
		{"HINCRBY h n x", "-ERR value is not an integer or out of range"},
		{"HSET h s abc big 9223372036854775807", ":2"},
		{"HINCRBY h s 1", "-ERR hash value is not an integer"},
		{"HINCRBY h big 1", "-ERR increment or decrement would overflow"},
		{"HINCRBYFLOAT h s 1", "-ERR hash value is not a float"},
		{"HINCRBYFLOAT h n 0.5", `"-1.5"`},
		{"HINCRBYFLOAT h n inf", "-ERR value is NaN or Infinity"},
		{"HINCRBYFLOAT h n nan", "-ERR value is not a valid float"},
		{"HINCRBYFLOAT h f 0.1", `"0.1"`},
		{"HINCRBYFLOAT h f 0.2", `"0.3"`},
		{"HINCRBY h f 1", "-ERR hash value is not an integer"},
		{"HINCRBYFLOAT h big 1", `"9223372036854775808"`},
		{"HINCRBYFLOAT nokey f inf", "-ERR value is NaN or Infinity"},
		{"EXISTS nokey", ":0"},
		{"HGET h n", `"-1.5"`},
	}},
}

func TestHashCommands(t *testing.T) {
	for _, tb := range hashTables {
		runTable(t, tb)
	}
}
