package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testcert"
	"github.com/rlserver/rlserver/internal/testutil"
)

// startLimited runs the binary under `ulimit -n files` (bash -c 'ulimit
// -n N && exec "$0" "$@"') with args on a fresh data directory, through
// launch: free RESP and HTTP ports (others should another process take
// one), PING waited for over TLS with tc (nil: plain TCP) noticing an
// exit, killed when the test ends. The client it waited with is closed:
// it would hold one of the places a test counts; a test dials its own.
func startLimited(t *testing.T, files int, tc *tls.Config, args ...string) *proc {
	t.Helper()
	bin, dir := buildBinary(t), t.TempDir()
	p, err := launch(t, "bash", dir, tc, func(resp, http string) []string {
		return append([]string{"-c", "ulimit -n " + strconv.Itoa(files) + ` && exec "$0" "$@"`, bin,
			"--listen", resp, "--http", http, "--data-dir", dir}, args...)
	})
	if err != nil {
		t.Fatal(err)
	}
	p.client.Close()
	return p
}

// pingOrRefusal sends PING on nc and returns the reply line.
func pingOrRefusal(nc net.Conn) string {
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(nc, "PING\r\n")
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		return err.Error()
	}
	return line
}

// Issue 10, item 2: running out of file descriptors made Serve return
// and rlserver exit 1 (accept4: too many open files): any client could
// kill the server, over RESP or HTTP. Under ulimit -n 128, --maxclients
// comes down to what the limit allows (64) and bounds RESP and HTTP
// clients together: 100 idle HTTP clients and 100 RESP clients get 63
// places between them besides the first client, every RESP client is
// answered or refused (none is left hanging), the server stays up, and
// once the HTTP clients leave new RESP clients are served.
func TestOutOfDescriptorsDoesNotKillTheServer(t *testing.T) {
	parallel(t)
	p := startLimited(t, 128, nil, "--grpc", "") // no gRPC budget: the 64 files left are all --maxclients'
	resp, httpAddr, logs := p.resp, p.http, p.logs
	first, err := net.Dial("tcp", resp)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if got := pingOrRefusal(first); got != "+PONG\r\n" {
		t.Fatalf("first client: %q", got)
	}
	var idle []net.Conn // HTTP clients that send nothing
	for i := 0; i < 100; i++ {
		if nc, err := net.Dial("tcp", httpAddr); err == nil {
			idle = append(idle, nc)
		}
	}
	var clients []net.Conn
	for i := 0; i < 100; i++ {
		nc, err := net.Dial("tcp", resp)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		clients = append(clients, nc)
		io.WriteString(nc, "PING\r\n")
	}
	answered, refused := 0, 0
	for _, nc := range clients {
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		switch line, _ := bufio.NewReader(nc).ReadString('\n'); line {
		case "+PONG\r\n":
			answered++
		case "-ERR max number of clients reached\r\n":
			refused++
		default:
			t.Fatalf("a client got %q\n%s", line, logs)
		}
	}
	if answered > 63 || refused == 0 {
		t.Fatalf("%d clients answered besides the first, %d refused; want at most 63 answered, the rest refused", answered, refused)
	}
	if got := pingOrRefusal(first); got != "+PONG\r\n" {
		t.Fatalf("the first client, still connected: %q", got)
	}
	if !p.process.Alive() {
		t.Fatalf("rlserver exited: %v\n%s", p.process.Err(), logs)
	}
	for _, nc := range append(idle, clients...) {
		nc.Close()
	}
	// Once the server has seen the others go, a new client is served.
	testutil.WaitForErr(t, 10*time.Second, "a new client to be served afterwards", func() error {
		nc, err := net.Dial("tcp", resp)
		if err != nil {
			t.Fatal(err)
		}
		got := pingOrRefusal(nc)
		nc.Close()
		if got != "+PONG\r\n" {
			return fmt.Errorf("PING answered %q", got)
		}
		return nil
	})
	if !strings.Contains(logs.String(), "serving=64") {
		t.Errorf("no warning that --maxclients came down to 64:\n%s", logs)
	}
}

// HTTP timeouts: a client that sends its headers too slowly, or stays
// idle between requests too long, is closed, and one more connection than
// the limit is closed at once, so that slow or idle HTTP clients cannot
// hold connections and descriptors for ever.
func TestHTTPTimeoutsAndLimit(t *testing.T) {
	alone(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	limits := httpTimeouts{readHeader: 200 * time.Millisecond, read: time.Second, write: time.Second, idle: 300 * time.Millisecond}
	hs := newHTTPServer(h, limits, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(newLimitListener(ln, 2, new(atomic.Int64)))
	defer hs.Close()
	closedWithin := func(nc net.Conn, what string, d time.Duration) {
		t.Helper()
		start := time.Now()
		nc.SetReadDeadline(start.Add(30 * time.Second))
		io.Copy(io.Discard, nc)
		if took := time.Since(start); took > d {
			t.Errorf("%s: closed after %v, want within %v", what, took, d)
		}
	}
	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n") // and never the end of the headers
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	rd := bufio.NewReader(idle)
	if res, err := http.ReadResponse(rd, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET: %v, %v", res, err)
	}
	third, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	// Bounds of a few seconds for timeouts of 200-300 ms: loose enough for a
	// busy machine, and a connection the server forgot stays open for ever.
	closedWithin(third, "a third connection beyond the limit of 2", 5*time.Second)
	closedWithin(slow, "headers never finished", 8*time.Second)
	closedWithin(idle, "idle after a request", 8*time.Second)
}

// --maxmemory and --maxmemory-policy reach the store: INFO reports them,
// and new keys beyond 2 MB get -OOM under noeviction.
func TestMaxMemoryFlags(t *testing.T) {
	parallel(t)
	p := startLimited(t, 4096, nil, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	resp, logs := p.resp, p.logs
	c := redis.NewClient(&redis.Options{Addr: resp})
	defer c.Close()
	ctx := context.Background()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil || !strings.Contains(info, "maxmemory:2097152\r\n") || !strings.Contains(info, "maxmemory_policy:noeviction\r\n") {
		t.Fatalf("INFO memory: %q, %v", info, err)
	}
	var oom error
	for round := 0; round < 100 && oom == nil; round++ {
		pipe := c.Pipeline()
		for i := 0; i < 1000; i++ {
			pipe.Do(ctx, "RL.CHECK", "k:"+strconv.Itoa(round*1000+i), "fixed", 10, "1h")
		}
		cmds, _ := pipe.Exec(ctx)
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				oom = err
				break
			}
		}
	}
	if oom == nil || oom.Error() != "OOM command not allowed when used memory > 'maxmemory'." {
		t.Fatalf("after 100,000 new keys in 2 MB: %v\n%s", oom, logs)
	}
}

// --tls-cert and --tls-key serve RESP and HTTP over TLS only: redis-cli
// --tls, go-redis with a tls.Config and a Go HTTPS client are served, a
// plain client is not. With --tls-ca-cert clients must present a
// certificate the CA signed.
func TestTLS(t *testing.T) {
	parallel(t)
	certs := testcert.New(t)
	ctx := context.Background()
	for _, clientAuth := range []bool{false, true} {
		args := []string{"--tls-cert", certs.CertFile, "--tls-key", certs.KeyFile}
		cliArgs := []string{"--tls", "--cacert", certs.CAFile}
		if clientAuth {
			args = append(args, "--tls-ca-cert", certs.CAFile)
			cliArgs = append(cliArgs, "--cert", certs.ClientCertFile, "--key", certs.ClientKeyFile)
		}
		p := startLimited(t, 4096, certs.ClientConfig(clientAuth), args...)
		resp, httpAddr, logs := p.resp, p.http, p.logs
		host, port, _ := net.SplitHostPort(resp)
		out, err := exec.Command("redis-cli", append(cliArgs, "-h", host, "-p", port, "RL.CHECK", "cli", "fixed", "5", testutil.NoRollover)...).CombinedOutput()
		if err != nil || strings.Fields(string(out))[0] != "1" {
			t.Fatalf("client auth %v: redis-cli --tls: %q, %v\n%s", clientAuth, out, err, logs)
		}
		rdb := redis.NewClient(&redis.Options{Addr: resp, TLSConfig: certs.ClientConfig(clientAuth)})
		if got, err := rdb.Do(ctx, "RL.CHECK", "cli", "fixed", 5, testutil.NoRollover).Int64Slice(); err != nil || got[2] != 3 {
			t.Fatalf("client auth %v: go-redis over TLS: %v, %v", clientAuth, got, err)
		}
		rdb.Close()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: certs.ClientConfig(clientAuth)}}
		res, err := hc.Get("https://" + httpAddr + "/healthz")
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("client auth %v: GET https://.../healthz: %v, %v", clientAuth, res, err)
		}
		res.Body.Close()
		plain, err := net.Dial("tcp", resp)
		if err != nil {
			t.Fatal(err)
		}
		if got := pingOrRefusal(plain); strings.Contains(got, "PONG") {
			t.Fatalf("a plain client on the TLS port got %q", got)
		}
		plain.Close()
		if clientAuth {
			anon := redis.NewClient(&redis.Options{Addr: resp, TLSConfig: certs.ClientConfig(false), MaxRetries: -1})
			if err := anon.Ping(ctx).Err(); err == nil {
				t.Fatal("a client without a certificate was served")
			}
			anon.Close()
			if _, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: certs.ClientConfig(false)}}).Get("https://" + httpAddr + "/healthz"); err == nil {
				t.Fatal("an HTTPS client without a certificate was served")
			}
		}
	}
}

// A server that listens beyond the loopback interface without
// --requirepass says so at start; one with a password, or on 127.0.0.1,
// does not.
func TestExposedWithoutPasswordWarns(t *testing.T) {
	parallel(t)
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--listen", "0.0.0.0:" + strings.Split(testutil.FreeAddr(t), ":")[1]}, true},
		{[]string{"--listen", "0.0.0.0:" + strings.Split(testutil.FreeAddr(t), ":")[1], "--requirepass", "pw"}, false},
		{nil, false},
	} {
		var logs bytes.Buffer
		err := runUntilReady(t, c.args, &logs)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "beyond the loopback interface without --requirepass"); got != c.warn {
			t.Errorf("%v: warned %v, want %v:\n%s", c.args, got, c.warn, logs.String())
		}
	}
}

// runUntilReady runs the server in-process with args (and free 127.0.0.1
// ports for what args leave out) until it is listening, then stops it.
func runUntilReady(t *testing.T, args []string, logw io.Writer) error {
	t.Helper()
	all := append([]string{"--listen", testutil.FreeAddr(t), "--http", testutil.FreeAddr(t), "--data-dir", t.TempDir()}, args...)
	cfg, err := loadConfig(all, env(nil), nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, logw, func(resp, http net.Addr) { cancel() }) }()
	return <-done
}
