// Command fwdauth measures what forward auth costs behind Caddy: requests
// per second and latency through Caddy with the README's forward_auth to
// rlserver, against the same Caddy without it, in one run.
//
//	make build
//	go run ./bench/cmd/fwdauth -c 16 -d 5s -rounds 2
//
// It starts bin/rlserver (in memory, one rule that never denies, so that
// every request makes the whole trip), a Go backend answering "ok", and
// two caddy processes on examples/forwardauth/Caddyfile: one as it is, one
// with its forward_auth block taken out. Then, for -rounds rounds, it drives
// each Caddy in turn with -c keep-alive clients for -d and prints the
// requests per second, p50 and p99 of each, and the added latency of the
// auth hop (the differences of the medians of the rounds); and, for
// reference, rlserver's /v1/forward-auth driven directly. Everything
// shares the machine: run it when the machine is quiet.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/bench/hist"
	"github.com/rlserver/rlserver/internal/rlproc"
)

type options struct {
	rlserver, caddy, caddyfile string
	clients, rounds            int
	d                          time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.rlserver, "rlserver", "bin/rlserver", "rlserver binary (make build)")
	flag.StringVar(&o.caddy, "caddy", "caddy", "caddy binary")
	flag.StringVar(&o.caddyfile, "caddyfile", "examples/forwardauth/Caddyfile", "the README's Caddyfile")
	flag.IntVar(&o.clients, "c", 16, "concurrent keep-alive clients")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds, each driving both Caddys in turn")
	flag.DurationVar(&o.d, "d", 5*time.Second, "duration of each drive")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "fwdauth:", err)
		os.Exit(1)
	}
}

// result is one drive of one Caddy.
type result struct {
	rps      float64
	p50, p99 time.Duration
	errors   int
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "fwdauth-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var procs []*rlproc.Proc
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	var rlRESP, rlHTTP string
	rl, err := rlproc.OnFreeAddrs(2, func(addrs []string) (*rlproc.Proc, error) {
		rlRESP, rlHTTP = addrs[0], addrs[1]
		p, err := rlproc.Start("rlserver", o.rlserver, []string{"--listen", rlRESP, "--http", rlHTTP, "--data-dir", "", "--grpc", ""}, nil)
		if err != nil {
			return nil, err
		}
		return p, waitHTTP("http://"+rlHTTP+"/healthz", p)
	})
	if rl != nil {
		procs = append(procs, rl)
	}
	if err != nil {
		return fmt.Errorf("starting rlserver: %w", err)
	}
	rule := `{"id":"bench","target":"*","tier":"*","key_type":"ip","algo":"token","limit":1000000000000,"window":"1s"}`
	resp, err := http.Post("http://"+rlHTTP+"/rules", "application/json", strings.NewReader(rule))
	if err != nil {
		return err
	}
	resp.Body.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go backend.Serve(ln)
	defer backend.Close()

	text, err := os.ReadFile(o.caddyfile)
	if err != nil {
		return err
	}
	urls := map[string]string{}
	caddy, err := exec.LookPath(o.caddy)
	if err != nil {
		return fmt.Errorf("starting caddy: %w", err)
	}
	for _, name := range []string{"caddy alone", "caddy + forward auth"} {
		port, err := rlproc.FreePort()
		if err != nil {
			return err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		conf := strings.ReplaceAll(string(text), "127.0.0.1:8080", rlHTTP)
		conf = strings.ReplaceAll(conf, "127.0.0.1:9000", ln.Addr().String())
		conf = strings.ReplaceAll(conf, ":8000", ":"+strconv.Itoa(port))
		if name == "caddy alone" {
			conf = regexp.MustCompile(`(?s)\tforward_auth .*?\n\t}\n`).ReplaceAllString(conf, "")
		}
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".Caddyfile")
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			return err
		}
		// env(1) gives caddy its own home and XDG directories under dir and
		// execs it.
		p, err := rlproc.Start(name, "env", []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir + "/data", "XDG_CONFIG_HOME=" + dir + "/config",
			caddy, "run", "--config", file, "--adapter", "caddyfile"}, nil)
		if err != nil {
			return fmt.Errorf("starting caddy: %w", err)
		}
		procs = append(procs, p)
		urls[name] = "http://" + addr + "/"
		if err := waitHTTP(urls[name], p); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}

	// rlserver's side of the hop alone: the auth request as Caddy sends it.
	urls["rlserver's forward auth"] = "http://" + rlHTTP + "/v1/forward-auth?tier=free"
	names := []string{"caddy alone", "caddy + forward auth", "rlserver's forward auth"}
	results := map[string][]result{}
	for round := 0; round < o.rounds; round++ {
		for _, name := range names {
			drive(urls[name], o.clients, time.Second) // warm up
			r := drive(urls[name], o.clients, o.d)
			results[name] = append(results[name], r)
			fmt.Printf("round %d  %-22s %9.0f rps  p50 %8v  p99 %8v  errors %d\n", round+1, name, r.rps,
				r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.errors)
		}
	}
	a, f := median(results[names[0]]), median(results[names[1]])
	fmt.Printf("\n%d clients, %d rounds of %v (medians of the rounds)\n", o.clients, o.rounds, o.d)
	fmt.Printf("| | rps | p50 | p99 |\n|---|---:|---:|---:|\n")
	fmt.Printf("| Caddy alone | %.0f | %v | %v |\n", a.rps, a.p50.Round(time.Microsecond), a.p99.Round(time.Microsecond))
	fmt.Printf("| Caddy + forward auth | %.0f | %v | %v |\n", f.rps, f.p50.Round(time.Microsecond), f.p99.Round(time.Microsecond))
	fmt.Printf("| ratio, added latency | %.2f× | +%v | +%v |\n", f.rps/a.rps, (f.p50 - a.p50).Round(time.Microsecond), (f.p99 - a.p99).Round(time.Microsecond))
	r := median(results[names[2]])
	fmt.Printf("| rlserver's /v1/forward-auth alone, no Caddy | %.0f | %v | %v |\n", r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond))
	return nil
}

// drive sends GET url from clients keep-alive clients for d.
func drive(url string, clients int, d time.Duration) result {
	var mu sync.Mutex
	all := hist.New()
	errs := 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 5 * time.Second}
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Forwarded-Uri", "/bench") // read by rlserver's forward auth only
			req.Header.Set("X-Forwarded-For", "203.0.113.7")
			h, e := hist.New(), 0
			for time.Now().Before(deadline) {
				t := time.Now()
				resp, err := c.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					e++
					continue
				}
				h.Record(int64(time.Since(t)))
			}
			mu.Lock()
			all.Merge(h)
			errs += e
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	return result{rps: float64(all.Count()) / took.Seconds(), p50: time.Duration(all.Quantile(0.5)),
		p99: time.Duration(all.Quantile(0.99)), errors: errs}
}

// median returns the round whose rps is the median, with the median p50
// and p99 of the rounds.
func median(rs []result) result {
	pick := func(v func(result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = v(r)
		}
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	return result{rps: pick(func(r result) float64 { return r.rps }),
		p50: time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99: time.Duration(pick(func(r result) float64 { return float64(r.p99) }))}
}

// waitHTTP polls url until it answers 200, for up to 20 s. It returns an
// error, with p's output, if p exits first or url does not answer.
func waitHTTP(url string, p *rlproc.Proc) error {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%w: %v\n%s", rlproc.ErrExited, p.Err(), p.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("no answer within 20s:\n" + p.Log().String())
}
