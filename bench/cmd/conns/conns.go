package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/bench/nodes"
)

// Result is what a run saw.
type Result struct {
	Opened, Ulimit          int
	RESPServed, RESPRefused int
	HTTPServed, HTTPClosed  int
	Failed                  int
	FirstFailure            string `json:",omitempty"`
	Seconds                 float64
	ConnectedAtPeak         int64
	RejectedConnections     int64
	AcceptRetries           int // "accept failed" log lines (throttled: at most 5 per 10 s)
	StayedUp                bool
	ServedAfter             bool
	CleanExit               bool
	Bystander               Watch
}

// held are the connections kept open until the end.
type held struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (h *held) keep(nc net.Conn) {
	h.mu.Lock()
	h.conns = append(h.conns, nc)
	h.mu.Unlock()
}

// open opens o.n connections, o.w at a time, and sorts their outcomes.
func open(o options, srv *server, in *inspector) *Result {
	r := &Result{Opened: o.n, Ulimit: o.ulimit}
	var h held
	var mu sync.Mutex
	sem := make(chan struct{}, o.w)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < o.n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			isHTTP := o.httpEvery > 0 && i%o.httpEvery == 0
			outcome, nc := connect(srv, isHTTP, o.timeout)
			mu.Lock()
			r.count(outcome)
			mu.Unlock()
			if nc != nil {
				h.keep(nc)
			}
		}(i)
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.StayedUp = srv.up()
	r.ConnectedAtPeak = in.info("connected_clients")
	r.RejectedConnections = in.info("rejected_connections")
	for _, nc := range h.conns {
		nc.Close()
	}
	return r
}

// connect opens one connection and returns its outcome: "resp", "refused",
// "http", "http-closed" or an error, and the connection if it is to be
// held open.
func connect(srv *server, isHTTP bool, timeout time.Duration) (string, net.Conn) {
	addr, req := srv.resp, "PING\r\n"
	if isHTTP {
		addr, req = srv.http, "GET /healthz HTTP/1.1\r\nHost: rlserver\r\n\r\n"
	}
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "dial: " + err.Error(), nil
	}
	nc.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(nc, req); err != nil {
		nc.Close()
		return outcomeOf(isHTTP, "", err), nil
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	out := outcomeOf(isHTTP, line, err)
	if out != "resp" && out != "http" {
		nc.Close()
		return out, nil
	}
	nc.SetDeadline(time.Time{})
	return out, nc
}

func outcomeOf(isHTTP bool, line string, err error) string {
	switch {
	case isHTTP && strings.HasPrefix(line, "HTTP/1.1 200"):
		return "http"
	case isHTTP && (err == io.EOF || isReset(err)):
		return "http-closed"
	case !isHTTP && line == "+PONG\r\n":
		return "resp"
	case !isHTTP && line == "-ERR max number of clients reached\r\n":
		return "refused"
	case err != nil:
		return err.Error()
	}
	return fmt.Sprintf("unexpected reply %q", line)
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

func (r *Result) count(outcome string) {
	switch outcome {
	case "resp":
		r.RESPServed++
	case "refused":
		r.RESPRefused++
	case "http":
		r.HTTPServed++
	case "http-closed":
		r.HTTPClosed++
	default:
		r.Failed++
		if r.FirstFailure == "" {
			r.FirstFailure = outcome
		}
	}
}

// finish checks, once the connections are closed, that a new client is
// served and that the server stops cleanly.
func (r *Result) finish(srv *server) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ping(srv.resp, 5*time.Second) == "+PONG" {
			r.ServedAfter = true
			break
		}
	}
	r.AcceptRetries = srv.logLines("accept failed")
	r.CleanExit = srv.stop() == nil
}

func (r *Result) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %d connections against rlserver under `ulimit -n %d`\n\n| | |\n|---|---:|\n", r.Opened, r.Ulimit)
	fmt.Fprintf(&b, "| RESP clients served (PING answered, held open) | %d |\n", r.RESPServed)
	fmt.Fprintf(&b, "| RESP clients refused (`max number of clients reached`) | %d |\n", r.RESPRefused)
	fmt.Fprintf(&b, "| HTTP clients served (GET /healthz, held open) / closed at the limit | %d / %d |\n", r.HTTPServed, r.HTTPClosed)
	fmt.Fprintf(&b, "| failed (no answer within the timeout, or refused by the kernel) | %d |\n", r.Failed)
	if r.FirstFailure != "" {
		fmt.Fprintf(&b, "| first failure | %s |\n", r.FirstFailure)
	}
	fmt.Fprintf(&b, "| time to open them all | %.1f s |\n| connected_clients at the peak | %d |\n", r.Seconds, r.ConnectedAtPeak)
	fmt.Fprintf(&b, "| INFO rejected_connections | %d |\n| 'accept failed' log lines (throttled) | %d |\n", r.RejectedConnections, r.AcceptRetries)
	fmt.Fprintf(&b, "| server stayed up | %v |\n| a new client served afterwards | %v |\n| stopped cleanly on SIGTERM | %v |\n",
		r.StayedUp, r.ServedAfter, r.CleanExit)
	fmt.Fprintf(&b, "| bystander PINGs answered / missed, longest wait | %d / %d, %.1f ms |\n",
		r.Bystander.Answered, r.Bystander.Missed, r.Bystander.WorstMs)
	return b.String()
}

func (r *Result) write(o options) error {
	return nodes.WriteResults(o.out, "conns", r, r.markdown())
}

// Watch is what the bystander saw.
type Watch struct {
	Answered, Missed int
	WorstMs          float64
}

// watcher is a client connected first that PINGs every 10 ms.
type watcher struct {
	nc   net.Conn
	stop chan struct{}
	done chan struct{}
	w    Watch
}

func watch(addr string) (*watcher, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	w := &watcher{nc: nc, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

func (w *watcher) run() {
	defer close(w.done)
	rd := bufio.NewReader(w.nc)
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		start := time.Now()
		w.nc.SetDeadline(start.Add(10 * time.Second))
		io.WriteString(w.nc, "PING\r\n")
		if line, err := rd.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			w.w.Missed++
			return
		}
		w.w.Answered++
		w.w.WorstMs = max(w.w.WorstMs, float64(time.Since(start))/1e6)
	}
}

// stop ends the watch and returns what it saw.
func (w *watcher) stopWatch() Watch {
	close(w.stop)
	<-w.done
	w.nc.Close()
	return w.w
}
