// Command conns opens many more connections than rlserver may hold open
// files, and checks that it stays up and serves: issue 10's measurement
// of 20,000 connections against ulimit -n 4096.
//
//	make build
//	go run ./bench/cmd/conns -n 20000 -ulimit 4096   # (make conns)
//
// It starts bin/rlserver under `ulimit -n`, keeps a bystander client
// PINGing, then opens -n connections, -w at a time, one in ten to the HTTP
// API (GET /healthz) and the rest over RESP (PING), and holds open every
// one that is served. It reports how many were served, refused ("max
// number of clients reached", or closed by the HTTP limit) or failed,
// whether the server stayed up, the bystander's longest wait, and whether
// a new client is served and the server stops cleanly once they are
// closed, in <out>/conns.md and .json.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

type options struct {
	rlserver, out string
	n, ulimit, w  int
	httpEvery     int
	timeout       time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.rlserver, "rlserver", "bin/rlserver", "rlserver binary (make build)")
	flag.StringVar(&o.out, "out", "bench/results", "directory for conns.md and conns.json")
	flag.IntVar(&o.n, "n", 20000, "connections to open")
	flag.IntVar(&o.ulimit, "ulimit", 4096, "open file limit (ulimit -n) of the server")
	flag.IntVar(&o.w, "w", 256, "connections being opened at once")
	flag.IntVar(&o.httpEvery, "http-every", 10, "one connection in this many goes to the HTTP API (0: none)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long a connection may wait for its reply")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "conns:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "rlserver-conns")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := start(o, dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	in, err := inspect(srv.resp)
	if err != nil {
		return err
	}
	by, err := watch(srv.resp)
	if err != nil {
		return err
	}
	r := open(o, srv, in)
	r.Bystander = by.stopWatch()
	r.finish(srv)
	if err := r.write(o); err != nil {
		return err
	}
	fmt.Print(r.markdown())
	if !r.StayedUp || !r.ServedAfter || !r.CleanExit || r.Bystander.Missed > 0 {
		return fmt.Errorf("the server did not hold: stayed up %v, served a new client %v, stopped cleanly %v, bystander missed %d",
			r.StayedUp, r.ServedAfter, r.CleanExit, r.Bystander.Missed)
	}
	return nil
}
