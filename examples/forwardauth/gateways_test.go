package forwardauth

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/rlproc"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/rules"
	"gopkg.in/yaml.v3"
)

// The rules of the tests: per ip on /login, per API key on /users/* for
// the free tier, per user on /account. Token buckets of an hour, so that
// no window ends during a test.
var testRules = []rules.Rule{
	{ID: "login-per-ip", Target: "/login", Tier: "*", KeyType: "ip", Algo: "token", Limit: 3, Window: "1h"},
	{ID: "users-free", Target: "/users/*", Tier: "free", KeyType: "apikey", Algo: "token", Limit: 2, Window: "1h"},
	{ID: "account-per-user", Target: "/account", Tier: "*", KeyType: "user", Algo: "token", Limit: 1, Window: "1h"},
	// A limit being tried: counted, never enforced, so never advertised.
	{ID: "new-global-cap", Target: "/shadowed", Tier: "*", KeyType: "ip", Algo: "token", Limit: 999, Window: "1h", Shadow: true},
}

// The addresses the configuration files name, replaced by free ones.
const (
	rlserverAddr = "127.0.0.1:8080"
	backendAddr  = "127.0.0.1:9000"
	gatewayPort  = "8000"
)

// backend counts the requests that reach it and keeps the RateLimit-Policy
// header of the last one (a gateway may copy it upstream).
type backend struct {
	hits   atomic.Int64
	mu     sync.Mutex
	policy string
}

func startBackend(t *testing.T) (*backend, string) {
	b := &backend{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		b.mu.Lock()
		b.policy = r.Header.Get("RateLimit-Policy")
		b.mu.Unlock()
		io.WriteString(w, "backend saw "+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return b, s.Listener.Addr().String()
}

func (b *backend) lastPolicy() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.policy
}

// readConfig returns the configuration file name as docs/gateways.md
// shows it, and fails the test if that page does not show it verbatim.
func readConfig(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/gateways.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(data)) {
		t.Errorf("docs/gateways.md does not show examples/forwardauth/%s verbatim: copy the file into its section \"Behind a gateway\"", name)
	}
	return string(data)
}

// setup starts rlserver with the test rules and a backend, and returns
// the gateway's configuration with their addresses and a free port for
// the gateway, the gateway's URL, the backend and rlserver.
func setup(t *testing.T, config string) (string, string, *backend, *testserver.Node) {
	n := testserver.Start(t, testserver.Options{})
	for _, r := range testRules {
		if _, err := n.Store.SetRule(r); err != nil {
			t.Fatal(err)
		}
	}
	b, baddr := startBackend(t)
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	config = strings.ReplaceAll(config, rlserverAddr, strings.TrimPrefix(n.URL, "http://"))
	config = strings.ReplaceAll(config, backendAddr, baddr)
	config = strings.ReplaceAll(config, ":"+gatewayPort, ":"+strconv.Itoa(port))
	return config, "http://127.0.0.1:" + strconv.Itoa(port), b, n
}

// run starts a gateway process in dir with env added to its environment
// (through env(1): rlproc.Start starts a binary with arguments alone) and
// kills it when the test ends; its output goes to the test's log on
// failure.
func run(t *testing.T, dir string, env []string, name string, args ...string) *rlproc.Proc {
	t.Helper()
	p, err := rlproc.Start(filepath.Base(name), "env", append(append(append([]string{"-C", dir}, env...), name), args...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, p.Log())
		}
	})
	return p
}

// waitUp polls url until the gateway p answers, for up to 20 s; it fails
// the test at once, with the gateway's output, if the gateway exits.
func waitUp(t *testing.T, p *rlproc.Proc, url string) {
	t.Helper()
	testutil.WaitForErr(t, 20*time.Second, "the gateway to answer at "+url, func() error {
		if !p.Alive() {
			return testutil.Stop(fmt.Errorf("it exited: %v\n%s", p.Err(), p.Log()))
		}
		resp, err := http.Get(url + "/healthz-of-the-backend")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

// from returns an HTTP client whose connections come from the loopback
// address ip (127.0.0.2, ...), so that the gateway sees distinct callers.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, url string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(body)}
}

// gateway is what differs between the gateways in what a client sees.
type gateway struct {
	headersOn200 bool   // the client sees the rate-limit headers on a 200 (else only the backend does)
	deniedBody   string // what the body of a 429 contains
}

// exercise drives the gateway at url: per ip, then per API key, 200s
// until the rule's limit, then 429 with Retry-After and RateLimit-Policy,
// and the backend reached exactly by the allowed requests.
func exercise(t *testing.T, url string, b *backend, gw gateway) {
	start := b.hits.Load()
	cases := []struct {
		name, path, ip, key string
		limit               int
		policy              string
	}{
		{"per ip", "/login", "127.0.0.2", "", 3, `"login-per-ip";q=3;w=3600`},
		{"per ip, another ip", "/login", "127.0.0.3", "", 3, `"login-per-ip";q=3;w=3600`},
		{"per API key", "/users/1", "127.0.0.4", "key-a", 2, `"users-free";q=2;w=3600`},
		{"per API key, another key from the same ip", "/users/1", "127.0.0.4", "key-b", 2, `"users-free";q=2;w=3600`},
	}
	allowed := 0
	for _, c := range cases {
		client := from(c.ip)
		header := []string{}
		if c.key != "" {
			header = []string{"X-Api-Key", c.key}
		}
		for i := 1; i <= c.limit; i++ {
			a := get(t, client, url+c.path, header...)
			if a.status != 200 || a.body != "backend saw "+c.path {
				t.Fatalf("%s: request %d: %d %q", c.name, i, a.status, a.body)
			}
			if gw.headersOn200 {
				if a.header.Get("RateLimit-Policy") != c.policy || a.header.Get("X-RateLimit-Remaining") != strconv.Itoa(c.limit-i) {
					t.Errorf("%s: request %d: headers %v", c.name, i, a.header)
				}
			} else if got := b.lastPolicy(); got != c.policy {
				t.Errorf("%s: request %d: the backend got RateLimit-Policy %q, want %q", c.name, i, got, c.policy)
			}
			allowed++
		}
		for i := 0; i < 2; i++ {
			a := get(t, client, url+c.path, header...)
			if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, gw.deniedBody) {
				t.Fatalf("%s: over the limit: %d %q", c.name, a.status, a.body)
			}
			if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 || ra > 3600/c.limit {
				t.Errorf("%s: Retry-After %q: want 1 to %d s (a token every hour/%d)", c.name, a.header.Get("Retry-After"), 3600/c.limit, c.limit)
			}
			if got := a.header.Get("RateLimit-Policy"); got != c.policy {
				t.Errorf("%s: 429 RateLimit-Policy %q, want %q", c.name, got, c.policy)
			}
			if got := a.header.Get("RateLimit"); !strings.HasPrefix(got, strings.Split(c.policy, ";")[0]+";r=0;t=") {
				t.Errorf("%s: 429 RateLimit %q", c.name, got)
			}
		}
		if got := b.hits.Load() - start; got != int64(allowed) {
			t.Fatalf("%s: the backend saw %d requests, want the %d allowed", c.name, got, allowed)
		}
	}
	// A path no rule names goes straight through.
	for i := 0; i < 5; i++ {
		if a := get(t, from("127.0.0.2"), url+"/elsewhere"); a.status != 200 {
			t.Fatalf("unlimited path: %d %q", a.status, a.body)
		}
	}
	// A path only a shadow rule names passes with none of its figures in
	// the headers, the client's or the backend's: it limits nothing.
	for i := 0; i < 2; i++ {
		a := get(t, from("127.0.0.5"), url+"/shadowed")
		if a.status != 200 {
			t.Fatalf("shadowed path: %d %q", a.status, a.body)
		}
		for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining"} {
			if v := a.header.Get(h); v != "" {
				t.Errorf("shadowed path: %s: %q, want none (a shadow rule is not enforced)", h, v)
			}
		}
		// (Caddy 2.6's copy_headers sends its placeholder's text for a
		// header that is absent, as for any path no rule names.)
		if got := b.lastPolicy(); got != "" && !strings.HasPrefix(got, "{http.") {
			t.Errorf("shadowed path: the backend got RateLimit-Policy %q, want none", got)
		}
	}
}

// rig is a gateway running with its README configuration in front of a
// backend, asking rlserver.
type rig struct {
	url string
	b   *backend
	n   *testserver.Node
	gw  gateway
}

// startCaddy runs Caddy with the README's Caddyfile in front of a backend.
func startCaddy(t *testing.T) rig {
	config := readConfig(t, "Caddyfile")
	testutil.RequireTool(t, "caddy", "apt-get install caddy")
	config, url, b, n := setup(t, config)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	caddy := run(t, dir, []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir + "/data", "XDG_CONFIG_HOME=" + dir + "/config"},
		"caddy", "run", "--config", filepath.Join(dir, "Caddyfile"), "--adapter", "caddyfile")
	waitUp(t, caddy, url)
	// Caddy hands rlserver's 429 to the client as is; on a 200 it copies
	// the headers to the request it sends the backend.
	return rig{url, b, n, gateway{deniedBody: `"allowed":false`}}
}

// startNginx runs nginx with the README's server block in front of a
// backend: rlserver's 403 (?deny_status=403) comes out as a 429 with
// Retry-After and the RateLimit headers.
func startNginx(t *testing.T) rig {
	server := readConfig(t, "nginx.conf")
	nginx := testutil.RequireTool(t, "nginx", "apt-get install nginx-light") // /usr/sbin/nginx, outside a user's PATH
	server, url, b, n := setup(t, server)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "server.conf"), []byte(server), 0o644); err != nil {
		t.Fatal(err)
	}
	main := fmt.Sprintf(`master_process off;
error_log %[1]s/error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/server.conf;
}
`, dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	p := run(t, dir, nil, nginx, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf"),
		"-g", "daemon off; pid "+filepath.Join(dir, "nginx.pid")+";")
	waitUp(t, p, url)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx's error.log:\n%s", logs)
		}
	})
	return rig{url, b, n, gateway{headersOn200: true, deniedBody: `{"error":"rate limit exceeded"}`}}
}

// TestCaddy: Caddy with the README's Caddyfile limits per ip and per API
// key, and a client can neither move the check nor take another identity.
func TestCaddy(t *testing.T) {
	r := startCaddy(t)
	t.Run("limits", func(t *testing.T) { exercise(t, r.url, r.b, r.gw) })
	t.Run("forged headers", func(t *testing.T) { forgedHeaders(t, r) })
	t.Run("path spellings", func(t *testing.T) { pathSpellings(t, r) })
}

// TestNginx: the same through nginx with the README's server block.
func TestNginx(t *testing.T) {
	r := startNginx(t)
	t.Run("limits", func(t *testing.T) { exercise(t, r.url, r.b, r.gw) })
	t.Run("forged headers", func(t *testing.T) { forgedHeaders(t, r) })
	t.Run("path spellings", func(t *testing.T) { pathSpellings(t, r) })
}

// TestTraefikConfigInREADME: Traefik is not in Debian, so its dynamic
// configuration is not run here; it must at least be the one the README
// shows, and let none of the client's headers that rlserver reads through
// but X-Api-Key (Traefik sets X-Forwarded-Uri, -Method and -For itself
// unless trustForwardHeader is on).
func TestTraefikConfigInREADME(t *testing.T) {
	var config struct {
		HTTP struct {
			Middlewares map[string]struct {
				ForwardAuth struct {
					Address            string   `yaml:"address"`
					TrustForwardHeader bool     `yaml:"trustForwardHeader"`
					AuthRequestHeaders []string `yaml:"authRequestHeaders"`
				} `yaml:"forwardAuth"`
			} `yaml:"middlewares"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal([]byte(readConfig(t, "traefik.yml")), &config); err != nil {
		t.Fatal(err)
	}
	fa := config.HTTP.Middlewares["rlserver"].ForwardAuth
	if !strings.Contains(fa.Address, "/v1/forward-auth") {
		t.Fatalf("traefik.yml does not name /v1/forward-auth: %+v", fa)
	}
	if fa.TrustForwardHeader || len(fa.AuthRequestHeaders) != 1 || !strings.EqualFold(fa.AuthRequestHeaders[0], "X-Api-Key") {
		t.Errorf("traefik.yml passes the client's headers on: trustForwardHeader %v, authRequestHeaders %v; want false, [X-Api-Key]",
			fa.TrustForwardHeader, fa.AuthRequestHeaders)
	}
}
