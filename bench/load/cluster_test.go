package load

import (
	"testing"

	"github.com/rlserver/rlserver/slots"
)

func TestTemplateRoutesByKey(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		key  string // with __rand_int__ as 42
		none bool
	}{
		{cmd: "RL.CHECK key:" + RandInt + " token 100 60", key: "key:000000000042"},
		{cmd: "RL.CHECK {user1}:" + RandInt + " token 100 60", key: "{user1}:000000000042"},
		{cmd: "EVALSHA abc 1 k:" + RandInt + " 100 " + NowMicros, key: "k:000000000042"},
		{cmd: "INCR counter", key: "counter"},
		{cmd: "PING", none: true},
	} {
		tpl, err := ParseTemplate(c.cmd)
		if err != nil {
			t.Fatal(err)
		}
		var now [nowWidth]byte
		req := tpl.appendTo(nil, 42, &now)
		want := -1
		if !c.none {
			want = slots.Of([]byte(c.key))
		}
		if got := tpl.slotAt(req); got != want {
			t.Errorf("%s: slot %d, want %d", c.cmd, got, want)
		}
	}
}

func TestParseSlots(t *testing.T) {
	raw := "*2\r\n" +
		"*4\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n*3\r\n$9\r\n127.0.0.1\r\n:7002\r\n$2\r\nid\r\n" +
		"*3\r\n:8192\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7002\r\n$2\r\nid\r\n"
	m, err := parseSlots([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.addrs) != 2 || m.addrFor(0, 0) != "127.0.0.1:7001" || m.addrFor(8191, 0) != "127.0.0.1:7001" ||
		m.addrFor(8192, 0) != "127.0.0.1:7002" || m.addrFor(16383, 0) != "127.0.0.1:7002" || m.addrFor(-1, 1) != "127.0.0.1:7002" {
		t.Fatalf("%v", m.addrs)
	}
	for _, bad := range []string{"+OK\r\n", "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n", "*0\r\n", "*1\r\n*3\r\n:0\r\n:1\r\n"} {
		if _, err := parseSlots([]byte(bad)); err == nil {
			t.Errorf("parseSlots(%q) accepted it", bad)
		}
	}
}
