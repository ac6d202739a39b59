// Command gateway is a runnable example: a reverse proxy that checks every
// request against rlserver's rules, with the client package's middleware,
// before passing it to a backend.
//
//	gateway -listen 127.0.0.1:8000 -backend http://127.0.0.1:9000 \
//	    -rlserver 127.0.0.1:6379 -fail grace -grace-then open -grace-instances 2 \
//	    -user-header X-User-ID -api-key-header X-API-Key \
//	    -api-tiers key-of-acme=pro -tier-header X-Tier -default-tier free
//
// The rule target is the request path. The tier is the one -api-tiers maps
// the caller's API key to, else the -tier-header value (set it only when an
// authenticating layer in front sets that header), else -default-tier.
//
// -fail says what happens when rlserver does not answer within -timeout:
// open lets requests through, closed answers 503, grace decides locally
// for -grace-for with this process's share (1/-grace-instances) of each
// rule's limit, then does what -grace-then says.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// config is the gateway's flags.
type config struct {
	listen, backend, rlserver, password string
	fail, graceThen                     string
	graceFor                            time.Duration
	graceInstances                      int
	timeout                             time.Duration
	userHeader, apiKeyHeader            string
	tierHeader, defaultTier, apiTiers   string
	trustedProxies                      string
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8000", "address to serve on")
	fs.StringVar(&c.backend, "backend", "", "URL of the backend to proxy to (required)")
	fs.StringVar(&c.rlserver, "rlserver", "127.0.0.1:6379", "rlserver RESP address")
	fs.StringVar(&c.password, "password", "", "rlserver --requirepass, if set")
	fs.StringVar(&c.fail, "fail", "", `when rlserver does not answer: "open" (let requests through), "closed" (503) or "grace" (decide locally for -grace-for, then -grace-then) (required)`)
	fs.DurationVar(&c.graceFor, "grace-for", client.DefaultGraceFor, "-fail grace: how long to decide locally once rlserver stops answering")
	fs.StringVar(&c.graceThen, "grace-then", "", `-fail grace: "open" or "closed" once -grace-for has passed (required with -fail grace)`)
	fs.IntVar(&c.graceInstances, "grace-instances", 1, "-fail grace: gateway processes sharing the limits; each admits 1/N of a rule's limit while deciding locally")
	fs.DurationVar(&c.timeout, "timeout", 100*time.Millisecond, "bound on each rate-limit check")
	fs.StringVar(&c.userHeader, "user-header", "X-User-ID", `header with the user id ("" for none)`)
	fs.StringVar(&c.apiKeyHeader, "api-key-header", "X-API-Key", `header with the API key ("" for none)`)
	fs.StringVar(&c.tierHeader, "tier-header", "", `header with the caller's tier, set by an authenticating layer ("" for none)`)
	fs.StringVar(&c.defaultTier, "default-tier", "free", "tier of callers with no other tier")
	fs.StringVar(&c.apiTiers, "api-tiers", "", "API key to tier mapping: key=tier,key=tier")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", "", "CIDRs of proxies whose X-Forwarded-For is honoured")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.backend == "":
		return c, errors.New("-backend is required")
	case c.fail != "open" && c.fail != "closed" && c.fail != "grace":
		return c, errors.New(`-fail must be "open", "closed" or "grace"`)
	case c.fail == "grace" && c.graceThen != "open" && c.graceThen != "closed":
		return c, errors.New(`-fail grace needs -grace-then "open" or "closed"`)
	case c.graceInstances < 1:
		return c, errors.New("-grace-instances must be at least 1")
	}
	return c, nil
}

// newHandler builds the proxy behind the rate-limit middleware.
func newHandler(c config, log *slog.Logger) (http.Handler, *client.Client, error) {
	backend, err := url.Parse(c.backend)
	if err != nil || backend.Scheme == "" || backend.Host == "" {
		return nil, nil, fmt.Errorf("-backend %q: want a URL such as http://127.0.0.1:9000", c.backend)
	}
	trusted, err := client.ParsePrefixes(c.trustedProxies)
	if err != nil {
		return nil, nil, fmt.Errorf("-trusted-proxies: %w", err)
	}
	tiers, err := parsePairs(c.apiTiers)
	if err != nil {
		return nil, nil, fmt.Errorf("-api-tiers: %w", err)
	}
	rl := client.Dial(c.rlserver, func(o *redis.Options) { o.Password = c.password })
	modes := map[string]client.FailMode{"open": client.FailOpen, "closed": client.FailClosed, "grace": client.FailGrace}
	mw, err := client.Middleware(client.MiddlewareConfig{
		Checker: rl, FailMode: modes[c.fail], Timeout: c.timeout, Logger: log,
		GraceFor: c.graceFor, GraceThen: modes[c.graceThen], GraceInstances: c.graceInstances,
		Identity: client.Identity{TrustedProxies: trusted, UserHeader: c.userHeader, APIKeyHeader: c.apiKeyHeader},
		Tier:     tierOf(c, tiers),
		OnError: func(r *http.Request, err error) {
			log.Warn("rate-limit check failed", "path", r.URL.Path, "fail", c.fail, "err", err)
		},
	})
	if err != nil {
		rl.Close()
		return nil, nil, err
	}
	return mw(httputil.NewSingleHostReverseProxy(backend)), rl, nil
}

// tierOf returns the tier function: the API key's tier, else the tier
// header, else the default tier.
func tierOf(c config, tiers map[string]string) func(*http.Request) string {
	return func(r *http.Request) string {
		if c.apiKeyHeader != "" {
			if t, ok := tiers[r.Header.Get(c.apiKeyHeader)]; ok {
				return t
			}
		}
		if c.tierHeader != "" {
			if t := r.Header.Get(c.tierHeader); t != "" {
				return t
			}
		}
		return c.defaultTier
	}
}

func parsePairs(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q is not key=tier", p)
		}
		m[k] = v
	}
	return m, nil
}

// run serves the gateway until ctx ends. ready, if not nil, gets the
// listening address.
func run(ctx context.Context, args []string, logw io.Writer, ready func(net.Addr)) error {
	c, err := parseFlags(args, logw)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logw, nil))
	h, rl, err := newHandler(c, log)
	if err != nil {
		return err
	}
	defer rl.Close()
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("gateway started", "listen", ln.Addr().String(), "backend", c.backend, "rlserver", c.rlserver, "fail", c.fail)
	if ready != nil {
		ready(ln.Addr())
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
