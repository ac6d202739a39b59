package server

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/redistest"
)

// readReply reads one whole RESP2 reply from rd and returns its bytes.
func readReply(t testing.TB, rd *bufio.Reader) string {
	t.Helper()
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	switch line[0] {
	case '$':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		if n < 0 {
			return line
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(rd, body); err != nil {
			t.Fatal(err)
		}
		return line + string(body)
	case '*':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		for i := 0; i < n; i++ {
			line += readReply(t, rd)
		}
	}
	return line
}

// exchange sends each request to addr on one connection and returns the
// replies.
func exchange(t testing.TB, addr string, reqs ...string) []string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(nc)
	var out []string
	for _, r := range reqs {
		if _, err := io.WriteString(nc, r); err != nil {
			t.Fatal(err)
		}
		out = append(out, readReply(t, rd))
	}
	return out
}

// TestLikeRedis sends the same requests to a real Redis and to rlserver,
// neither with a password, and wants the same replies.
func TestLikeRedis(t *testing.T) {
	redisAddr := redistest.Start(t)
	_, addr := startServer(t, Config{})
	for name, reqs := range map[string][]string{
		"AUTH forms": {
			resp("AUTH", "x"), resp("AUTH", "default", "x"), resp("AUTH", "nobody", "x"),
			resp("AUTH", "a", "b", "c"), resp("PING"),
		},
		"INFO cluster": {resp("INFO", "cluster")},
		"MULTI": {
			resp("EXEC"), resp("DISCARD"), resp("MULTI"), resp("MULTI"), resp("WATCH", "k"), resp("PING"),
			resp("NOSUCH"), resp("EXEC"), resp("MULTI"), resp("ECHO", "a"), resp("EXEC"),
		},
	} {
		want := exchange(t, redisAddr, reqs...)
		got := exchange(t, addr, reqs...)
		for i := range reqs {
			if got[i] != want[i] {
				t.Errorf("%s: %q\n rlserver %q\n    Redis %q", name, reqs[i], got[i], want[i])
			}
		}
	}
}

func TestAuthNoPassword(t *testing.T) {
	// With only an admin token, the default user still has no password.
	runScript(t, Config{AdminToken: "root"}, []step{
		{resp("AUTH", "x"), "-ERR AUTH <password> called without any password configured for the default user. " +
			"Are you sure your configuration is correct?\r\n"},
		{resp("AUTH", "default", "anything"), "+OK\r\n"},
		{resp("FLUSHALL"), "-NOPERM this user has no permissions to run the 'flushall' command (AUTH admin <admin-token> first)\r\n"},
		{resp("AUTH", "admin", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{resp("AUTH", "admin", "root"), "+OK\r\n"},
		{resp("FLUSHALL"), "+OK\r\n"},
	})
}

// clientFields returns the field names of a CLIENT INFO/LIST line, in
// order, and their values.
func clientFields(line string) ([]string, map[string]string) {
	var names []string
	vals := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		names = append(names, k)
		vals[k] = v
	}
	return names, vals
}

// bulk returns the payload of a bulk-string reply.
func bulk(reply string) string {
	_, body, _ := strings.Cut(reply, "\r\n")
	return strings.TrimSuffix(body, "\r\n")
}

// redis72Fields are the fields of Redis 7.2's CLIENT LIST, in order.
var redis72Fields = strings.Fields("id addr laddr fd name age idle flags db sub psub ssub multi qbuf qbuf-free " +
	"argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp lib-name lib-ver")

// TestClientInfoFields: CLIENT INFO and CLIENT LIST print the fields Redis
// 7.2 prints, in its order, with integers where Redis has integers. A real
// Redis 7 prints the same (7.0 and 7.1 without lib-name and lib-ver).
func TestClientInfoFields(t *testing.T) {
	redisAddr := redistest.Start(t)
	_, addr := startServer(t, Config{})
	want := redis72Fields
	redisFields, redisVals := clientFields(bulk(exchange(t, redisAddr, resp("CLIENT", "INFO"))[0]))
	version := exchange(t, redisAddr, resp("INFO", "server"))[0]
	switch {
	case !strings.Contains(version, "redis_version:7."):
		t.Logf("the Redis on PATH is not Redis 7; its fields %v are not compared", redisFields)
	case strings.Join(redisFields, " ") != strings.Join(want, " ") && strings.Join(redisFields, " ") != strings.Join(want[:len(want)-2], " "):
		t.Errorf("Redis 7 prints %v, not the fields this test expects", redisFields)
	}
	replies := exchange(t, addr, resp("CLIENT", "SETNAME", "me"), resp("CLIENT", "INFO"),
		resp("MULTI"), resp("CLIENT", "INFO"), resp("PING"), resp("EXEC"), resp("CLIENT", "LIST"))
	info := bulk(replies[1])
	if !strings.HasSuffix(info, "\n") {
		t.Errorf("CLIENT INFO %q does not end with a newline", info)
	}
	names, vals := clientFields(info)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("CLIENT INFO fields\n got %v\nwant %v", names, want)
	}
	for _, k := range []string{"id", "age", "idle", "db", "sub", "psub", "ssub", "multi", "qbuf", "qbuf-free",
		"argv-mem", "multi-mem", "rbs", "rbp", "obl", "oll", "omem", "tot-mem", "redir", "resp", "fd"} {
		if _, err := strconv.ParseInt(vals[k], 10, 64); err != nil {
			t.Errorf("%s=%q is not an integer", k, vals[k])
		}
	}
	if vals["name"] != "me" || vals["flags"] != "N" || vals["multi"] != "-1" || vals["user"] != "default" ||
		vals["resp"] != "2" || vals["db"] != "0" || vals["events"] != "r" {
		t.Errorf("CLIENT INFO values: %q", info)
	}
	// The command with its subcommand, as Redis 7 shows it.
	if vals["cmd"] != "client|info" || strings.Contains(version, "redis_version:7.") && redisVals["cmd"] != vals["cmd"] {
		t.Errorf("CLIENT INFO shows cmd=%s, Redis cmd=%s; want client|info", vals["cmd"], redisVals["cmd"])
	}
	// Inside a transaction, as Redis: flags x and the number of queued commands.
	if !strings.HasPrefix(replies[5], "*2\r\n$") {
		t.Fatalf("EXEC = %q", replies[5])
	}
	execInfo := strings.SplitN(replies[5], "\r\n", 4)[2]
	if _, v := clientFields(execInfo); v["flags"] != "x" || v["multi"] != "2" {
		t.Errorf("CLIENT INFO inside EXEC: %q, want flags=x multi=2", execInfo)
	}
	list := bulk(replies[6])
	if names, v := clientFields(strings.TrimSuffix(list, "\n")); strings.Join(names, " ") != strings.Join(want, " ") || v["cmd"] != "client|list" {
		t.Errorf("CLIENT LIST fields %v, cmd=%s (want client|list)", names, v["cmd"])
	}
}
