package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testcert"
	"github.com/rlserver/rlserver/internal/testutil"
)

// fileRule is one rule of a rules file written by the reload tests
// (fixed, limit per 366 days: see testutil.NoRollover).
func fileRule(id, target string, limit int) string {
	return fmt.Sprintf("- id: %s\n  target: %s\n  tier: \"*\"\n  key_type: user\n  algo: fixed\n  limit: %d\n  window: %s\n", id, target, limit, testutil.NoRollover)
}

// startTLSProc starts bin with args, its RESP and HTTP on free ports over
// TLS, and waits for a PING through a client of tc.
func startTLSProc(t *testing.T, bin string, tc *tls.Config, args ...string) *proc {
	t.Helper()
	p, err := launch(t, bin, "", tc, func(resp, http string) []string {
		return append([]string{"--listen", resp, "--http", http}, args...)
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// peerCert returns the certificate addr serves a new TLS connection.
func peerCert(t *testing.T, addr string, tc *tls.Config) []byte {
	t.Helper()
	c, err := tls.Dial("tcp", addr, tc)
	if err != nil {
		t.Fatalf("tls dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Raw
}

// ruleLimit returns the limit of rule id as RL.RULE.GET shows it, or -1
// if there is no such rule.
func ruleLimit(p *proc, id string) int {
	js, err := p.client.Do(context.Background(), "RL.RULE.GET", id).Text()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	var r struct{ Limit int }
	if err != nil || json.Unmarshal([]byte(js), &r) != nil {
		p.t.Fatalf("RL.RULE.GET %s: %q, %v", id, js, err)
	}
	return r.Limit
}

// tlsLoad is go-redis clients checking continuously, each on its own
// connections, counting their checks and errors.
type tlsLoad struct {
	stopOnce sync.Once
	quit     chan struct{}
	wg       sync.WaitGroup
	checks   atomic.Int64
	mu       sync.Mutex
	errs     []error
}

func startTLSLoad(t *testing.T, addr string, tc *tls.Config, clients int) *tlsLoad {
	l := &tlsLoad{quit: make(chan struct{})}
	for i := 0; i < clients; i++ {
		rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tc, PoolSize: 2, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			ctx := context.Background()
			for n := 0; ; n++ {
				select {
				case <-l.quit:
					return
				default:
				}
				var err error
				if n%2 == 0 {
					err = rdb.Do(ctx, "RL.CHECK", fmt.Sprintf("load-%d-%d", i, n%50), "fixed", 1000000, "1h").Err()
				} else {
					err = rdb.Do(ctx, "RL.CHECKRULES", "/load", "free", fmt.Sprintf("user=l%d", i)).Err()
				}
				if err != nil {
					l.mu.Lock()
					l.errs = append(l.errs, err)
					l.mu.Unlock()
				}
				l.checks.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return l
}

func (l *tlsLoad) stop() (int64, []error) {
	l.stopOnce.Do(func() { close(l.quit) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checks.Load(), l.errs
}

// copyFile copies src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(dst, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// metricValue returns the value of the sample line that begins with
// series in a /metrics page, or -1.
func metricValue(page, series string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// TestSIGHUPReloadsUnderLoad: a TLS node with a --rules file, under a load
// of go-redis clients over TLS, gets SIGHUP after its rules file and its
// certificate were replaced. The file's changed rule has its new limit
// (RL.RULE.GET and a check), the rule the file dropped is gone, the new
// one is there, a rule made at run time stays; a new connection is served
// the new certificate; the load sees no error; a reload of a broken rules
// file and of a missing key changes nothing and stops nothing; the
// reloads are counted; SIGTERM ends it with status 0. A restart with a
// file that drops another rule deletes it at start.
func TestSIGHUPReloadsUnderLoad(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	old, fresh := testcert.New(t), testcert.New(t)
	certFile, keyFile := dir+"/cert.pem", dir+"/key.pem"
	copyFile(t, old.CertFile, certFile)
	copyFile(t, old.KeyFile, keyFile)
	pool := x509.NewCertPool()
	for _, f := range []string{old.CAFile, fresh.CAFile} {
		b, _ := os.ReadFile(f)
		pool.AppendCertsFromPEM(b)
	}
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	rulesFile := dir + "/rules.yaml"
	write := func(content string) {
		if err := os.WriteFile(rulesFile, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(fileRule("file-a", "/a", 5) + fileRule("file-gone", "/gone", 3))
	data := t.TempDir()
	p := startTLSProc(t, bin, tc, "--data-dir", data, "--rules", rulesFile, "--tls-cert", certFile, "--tls-key", keyFile)
	ctx := context.Background()
	if err := p.client.Do(ctx, "RL.RULE.SET", "runtime-r",
		`{"id":"runtime-r","target":"/r","tier":"*","key_type":"user","algo":"fixed","limit":9,"window":"1h"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if a, g := ruleLimit(p, "file-a"), ruleLimit(p, "file-gone"); a != 5 || g != 3 {
		t.Fatalf("at start: file-a limit %d, file-gone %d", a, g)
	}
	if !bytes.Equal(peerCert(t, p.resp, tc), old.Server.Certificate[0]) {
		t.Fatal("the node does not serve --tls-cert")
	}
	load := startTLSLoad(t, p.resp, tc, 6)
	testutil.WaitFor(t, 10*time.Second, "the load running", func() bool { return load.checks.Load() > 200 })

	write(fileRule("file-a", "/a", 7) + fileRule("file-new", "/new", 2))
	copyFile(t, fresh.CertFile, certFile)
	copyFile(t, fresh.KeyFile, keyFile)
	p.process.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 10*time.Second, "the rules reloaded", func() bool { return ruleLimit(p, "file-a") == 7 })
	if g, n, r := ruleLimit(p, "file-gone"), ruleLimit(p, "file-new"), ruleLimit(p, "runtime-r"); g != -1 || n != 2 || r != 9 {
		t.Fatalf("after SIGHUP: file-gone %d (want gone), file-new %d (want 2), runtime-r %d (want 9)\n%s", g, n, r, p.logs)
	}
	for i := 1; i <= 8; i++ {
		v, err := p.client.Do(ctx, "RL.CHECKRULES", "/a", "free", "user=u1").Slice()
		if err != nil || v[1] != int64(7) || (v[0] == int64(1)) != (i <= 7) {
			t.Fatalf("check %d of /a after the reload: %v, %v (want limit 7, allowed %v)", i, v, err, i <= 7)
		}
	}
	if !bytes.Equal(peerCert(t, p.resp, tc), fresh.Server.Certificate[0]) {
		t.Fatal("a new RESP connection after SIGHUP was not served the new certificate")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	res, err := hc.Get("https://" + p.http + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if !bytes.Equal(res.TLS.PeerCertificates[0].Raw, fresh.Server.Certificate[0]) {
		t.Fatal("a new HTTPS connection after SIGHUP was not served the new certificate")
	}

	// A broken rules file and a missing key: both refused, nothing changes.
	write("- id: file-a\n  limit: nope\n")
	os.Remove(keyFile)
	p.process.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 10*time.Second, "the failed reloads logged", func() bool {
		return strings.Count(p.logs.String(), "reload failed") >= 2
	})
	if a := ruleLimit(p, "file-a"); a != 7 {
		t.Fatalf("a broken file's reload changed file-a's limit to %d", a)
	}
	if !bytes.Equal(peerCert(t, p.resp, tc), fresh.Server.Certificate[0]) {
		t.Fatalf("a failed TLS reload changed the certificate")
	}
	time.Sleep(200 * time.Millisecond) // the load goes on across the reloads
	checks, errs := load.stop()
	if len(errs) > 0 {
		t.Fatalf("the load saw %d errors of %d checks across the reloads, first %v\n%s", len(errs), checks, errs[0], p.logs)
	}
	res, err = hc.Get("https://" + p.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for series, want := range map[string]float64{
		`rlserver_reloads_total{result="ok",what="rules"}`: 1, `rlserver_reloads_total{result="error",what="rules"}`: 1,
		`rlserver_reloads_total{result="ok",what="tls"}`: 1, `rlserver_reloads_total{result="error",what="tls"}`: 1,
	} {
		if got := metricValue(string(page), series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	p.stop() // SIGTERM: exit status 0
	t.Logf("%d checks over TLS across 2 SIGHUPs, no error", checks)

	// A restart with a file that no longer names file-new deletes it.
	write(fileRule("file-a", "/a", 7))
	q := startProc(t, bin, data, "--rules", rulesFile)
	if n, r, a := ruleLimit(q, "file-new"), ruleLimit(q, "runtime-r"), ruleLimit(q, "file-a"); n != -1 || r != 9 || a != 7 {
		t.Fatalf("after a restart: file-new %d (want gone), runtime-r %d (want 9), file-a %d (want 7)", n, r, a)
	}
	q.stop()
}

// TestSIGHUPWithNothingToReload: a node started without files lives
// through SIGHUP (it used to die of it, status 129) and stops with 0.
func TestSIGHUPWithNothingToReload(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	p := startProc(t, bin, t.TempDir())
	for i := 0; i < 3; i++ {
		p.process.Signal(syscall.SIGHUP)
	}
	testutil.WaitFor(t, 10*time.Second, "the SIGHUP logged", func() bool {
		return strings.Contains(p.logs.String(), "SIGHUP: nothing to reload")
	})
	if err := p.client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after SIGHUP: %v\n%s", err, p.logs)
	}
	p.stop()
}

// TestSIGHUPReloadsClusterRules: in a three-node cluster started with the
// same --rules file, a SIGHUP to one node after the file changed stores
// the changed rule and deletes the dropped one through the meta group:
// every node shows them.
func TestSIGHUPReloadsClusterRules(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	rulesFile := writeFile(t, fileRule("c-a", "/a", 5)+fileRule("c-gone", "/gone", 3))
	procs := startNodes(t, bin, 3, 4, "--rules", rulesFile)
	waitBalanced(t, procs, 60*time.Second)
	for _, p := range procs {
		testutil.WaitFor(t, 30*time.Second, p.resp+" holding the file's rules", func() bool {
			return ruleLimit(p, "c-a") == 5 && ruleLimit(p, "c-gone") == 3
		})
	}
	if err := os.WriteFile(rulesFile, []byte(fileRule("c-a", "/a", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	procs[0].process.Signal(syscall.SIGHUP)
	for _, p := range procs {
		testutil.WaitFor(t, 30*time.Second, p.resp+" holding the reloaded rules", func() bool {
			return ruleLimit(p, "c-a") == 8 && ruleLimit(p, "c-gone") == -1
		})
	}
	for _, p := range procs {
		p.stop()
	}
}
