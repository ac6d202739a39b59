package load

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeServer answers every RESP array with :1, or with an error for
// commands named ERR.
func fakeServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFake(nc)
		}
	}()
	return ln.Addr().String()
}

func serveFake(nc net.Conn) {
	defer nc.Close()
	rd := bufio.NewReader(nc)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		n := 0
		for _, c := range line[1 : len(line)-2] {
			n = n*10 + int(c-'0')
		}
		var name string
		for i := 0; i < n; i++ {
			hdr, _ := rd.ReadString('\n')
			size := 0
			for _, c := range hdr[1 : len(hdr)-2] {
				size = size*10 + int(c-'0')
			}
			b := make([]byte, size+2)
			if _, err := io.ReadFull(rd, b); err != nil {
				return
			}
			if i == 0 {
				name = string(b[:size])
			}
		}
		reply := ":1\r\n"
		if name == "ERR" {
			reply = "-ERR nope\r\n"
		}
		if _, err := io.WriteString(nc, reply); err != nil {
			return
		}
	}
}

func TestRunCountsEveryReply(t *testing.T) {
	addr := fakeServer(t)
	tpl, err := ParseTemplate("INCR key:" + RandInt)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := ParseTemplate("ERR " + NowMicros)
	res, err := Run(context.Background(), Config{Addr: addr, Conns: 4, Pipeline: 8, Requests: 1000,
		Templates: []*Template{tpl, bad}, Dist: "zipf"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 1000 || res.Errors == 0 || res.Errors == 1000 || res.FirstError != "ERR nope" {
		t.Fatalf("requests %d errors %d first %q", res.Requests, res.Errors, res.FirstError)
	}
	if res.Latency.P50 <= 0 || res.Latency.P99 < res.Latency.P50 || res.Latency.Max < res.Latency.P999 {
		t.Fatalf("latency %+v", res.Latency)
	}
	var b strings.Builder
	WriteTable(&b, []*Result{res})
	if !strings.Contains(b.String(), "p99.9") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestRunForADuration(t *testing.T) {
	addr := fakeServer(t)
	tpl, _ := ParseTemplate("PING")
	res, err := Run(context.Background(), Config{Addr: addr, Conns: 2, Pipeline: 4,
		Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond, Templates: []*Template{tpl}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.RPS <= 0 || res.Seconds != 0.2 {
		t.Fatalf("%+v", res)
	}
}

func TestTemplateEncoding(t *testing.T) {
	tpl, err := ParseTemplate(`EVALSHA abc 1 k:` + RandInt + ` "a b" ` + NowMicros)
	if err != nil {
		t.Fatal(err)
	}
	var now [nowWidth]byte
	putDigits(now[:], 1700000000123456)
	got := string(tpl.appendTo(nil, 42, &now))
	want := "*6\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$14\r\nk:000000000042\r\n$3\r\na b\r\n$16\r\n1700000000123456\r\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
