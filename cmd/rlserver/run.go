package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/internal/rest"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
)

// shutdownGrace bounds how long a stop waits for connections to finish.
const shutdownGrace = 10 * time.Second

// listening, when not nil, receives the RESP and HTTP addresses once both
// listeners are open (tests use it with ":0" ports).
type listening func(resp, http net.Addr)

// run starts the node described by cfg and serves until ctx ends, then
// stops gracefully: it stops accepting, finishes in-flight commands and
// returns nil.
func run(ctx context.Context, cfg Config, logw io.Writer, ready listening) error {
	hup := make(chan os.Signal, 1) // first: a SIGHUP during the start waits for it instead of stopping the process
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log := newLogger(cfg, logw)
	if cfg.Procs > 0 {
		runtime.GOMAXPROCS(cfg.Procs)
	}
	var connMem atomic.Int64 // the server's connection buffers, which --maxmemory counts
	policy, _ := shards.ParsePolicy(cfg.MaxMemoryPolicy)
	limitHeap(budgetFor(cfg.MaxMemory, cfg.DataDir != ""), cfg.MaxMemory, log)
	heap := newHeapMeter()
	var held func() int64 // the heap the state and connections do not account for, under --maxmemory
	if cfg.MaxMemory > 0 {
		reserve := cfg.MaxMemory / 8 // room for the collector (see memoryBudget)
		held = func() int64 { return heap.held() + reserve }
	}
	warnBlocks(cfg, log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerMaxMemory(reg, cfg.MaxMemory)
	if cfg.MaxConfigBytes <= 0 {
		cfg.MaxConfigBytes = DefaultMaxConfigBytes // a Config made without loadConfig
	}
	fileRules, err := readRules(cfg.RulesFile, cfg.MaxLogLimit, cfg.MaxConfigBytes)
	if err != nil {
		return err
	}
	// pprof first, so that a slow start can be profiled too.
	stopPprof, err := startPprof(cfg.Pprof, log)
	if err != nil {
		return err
	}
	defer stopPprof()
	wall := newWallClock()
	if cfg.TestClockShiftFile != "" {
		wall.watchShift(ctx, cfg.TestClockShiftFile, log)
	}
	clk := newNodeClock(wall, log)
	clk.register(reg)
	st, err := openState(ctx, &cfg, clk, shards.Options{Shards: cfg.Shards, MaxMemory: cfg.MaxMemory, Policy: policy, Other: &connMem,
		Held: held, MaxBlocks: maxBlocks(cfg)}, reg, log)
	if err != nil {
		return err
	}
	clk.persist()
	heap.run(ctx, func() int64 { return st.lim.MemoryBytes() + connMem.Load() })
	stopped := false
	defer func() {
		if !stopped {
			st.close(context.Background(), log)
		}
	}()
	fr, err := newFileRules(cfg.RulesFile, cfg.MaxLogLimit, cfg.MaxConfigBytes, st.lim, cfg.DataDir, log)
	if err != nil {
		return err
	}
	if st.cl != nil {
		// At start every node is electing: retry while the meta group has no leader.
		go func() {
			if err := fr.load(ctx, fileRules, time.Minute); err != nil {
				log.Error("rules file: not every rule could be stored", "err", err)
			}
		}()
	} else if err := fr.load(ctx, fileRules, 0); err != nil {
		return err
	}
	grpcWant := 0
	if cfg.GRPC != "" {
		grpcWant = cfg.GRPCMaxClients
	}
	clients, grpcClients := clientBudgets(cfg.MaxClients, grpcWant, log)
	var open atomic.Int64 // client connections, RESP and HTTP: --maxclients bounds them together
	gov := restGovernor(cfg, log)
	var touch func()
	if gov != nil {
		touch = gov.Touch
	}
	srv := server.New(server.Config{
		Limiter: st.lim, RequirePass: cfg.RequirePass, AdminToken: cfg.AdminToken,
		MaxKeyBytes: cfg.MaxKeyBytes, MaxLogLimit: cfg.MaxLogLimit,
		Logger: log, Registerer: reg, Version: version, IOLoops: cfg.IOLoops,
		MaxClients: clients, IdleTimeout: time.Duration(cfg.Timeout) * time.Second,
		ConnMemory: &connMem, MaxBuffered: maxBuffered(cfg.MaxMemory), OpenClients: &open,
		LuaTimeLimit: cfg.LuaTimeLimit, LuaMemoryLimit: cfg.LuaMemoryLimit, InterpretAllScripts: cfg.LuaInterpretAll,
		Clock: st.now, ClockOffset: clk.Offset, HeapMemory: heap.Memory, OnBatch: touch,
	})
	if st.cl != nil {
		st.cl.SetExecutor(srv) // runs the commands of values and scripts other nodes forward
	}
	tc, tf, err := tlsConfig(cfg)
	if err != nil {
		return err
	}
	ln, err := listen(cfg.Listen, tc)
	if err != nil {
		return fmt.Errorf("listen on %s (--listen): %w", cfg.Listen, err)
	}
	rls, err := startRLS(ctx, cfg, st, reg, tc, grpcClients, touch, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer rls.stop()
	hc := httpConfig(cfg, st, reg, srv, log)
	hc.OnCheck = touch
	hc.Status = startStatus(ctx, cfg, st, srv, statusHooks{HotKeys: statusHotKeys(st.lim, st.now), Blocks: statusBlocks(st.lim, st.now)})
	hs, hln, err := startHTTP(cfg.HTTP, rls.withJSON(httpapi.New(hc)), clients, &open, tc, log)
	if err != nil {
		ln.Close()
		return err
	}
	log.Info("rlserver started", "version", version, "resp", ln.Addr().String(), "http", cfg.HTTP,
		"data_dir", cfg.DataDir, "shards", shardCount(st.stores()), "procs", runtime.GOMAXPROCS(0), "auth", cfg.RequirePass != "",
		"tls", tc != nil)
	warnExposed(cfg, log)
	if ready != nil {
		ready(ln.Addr(), addrOf(hln))
	}
	rl := newReloader(reg, log)
	addReloads(ctx, rl, cfg, fr, st, rls, tf)
	go rl.run(ctx, hup)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	go sweep(ctx, st.stores, st.now)
	go clk.keep(ctx)
	if gov != nil {
		go gov.Run(ctx)
	}
	if st.cl != nil {
		st.cl.Listening() // other nodes may hand this one leads now
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if st.cl != nil {
		stepDown(sctx, st.cl, srv, log)
	}
	log.Info("shutting down: no new connections, finishing in-flight commands")
	if hs != nil {
		hs.Shutdown(sctx)
	}
	rls.stop()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("connections did not finish in time; closed them", "err", err)
	}
	stopped = true
	st.close(sctx, log)
	log.Info("stopped")
	return nil
}

// reloadRetry bounds how long a SIGHUP's reload of the rules file waits
// for a cluster's meta group to have a leader.
const reloadRetry = 10 * time.Second

// addReloads registers with rl what a SIGHUP reloads: the --rules file,
// --envoy-config and the TLS files, those that are given.
func addReloads(ctx context.Context, rl *reloader, cfg Config, fr *fileRules, st *state, rls *rlsFront, tf *tlsFiles) {
	if cfg.RulesFile != "" {
		retry := time.Duration(0)
		if st.cl != nil {
			retry = reloadRetry
		}
		rl.add("rules", func() error { return fr.reload(ctx, retry) })
	}
	if rls.watcher != nil {
		rl.add("envoy", rls.watcher.Reload)
	}
	if tf != nil {
		rl.add("tls", tf.load)
	}
}

// stepDown hands every lead of a cluster node to the other nodes while
// its clients are still connected — their commands are held, then
// answered MOVED to the new leaders — and keeps answering until no client
// has been sent away for drainQuiet (at most drainMax), so that every
// client that uses this node learns where its slots went before the
// listener closes: a rolling restart shows clients no error. A lead that
// comes to the node meanwhile (a hand-over another node began before
// this one stopped taking leads) is handed over too, and the quiet
// counts from then.
func stepDown(ctx context.Context, cl *cluster.Cluster, srv *server.Server, log *slog.Logger) {
	start := time.Now()
	log.Info("stopping: handing this node's groups to the others before closing client connections")
	cl.StepDown(ctx)
	handed := time.Now()
	quietFrom := handed
	// The drain, hand-overs included, ends by drainMax: shutdownGrace
	// must leave the rest of the stop (committing the last changes) time.
	dctx, cancel := context.WithDeadline(ctx, handed.Add(drainMax))
	defer cancel()
	for dctx.Err() == nil {
		if cl.Unhanded() {
			log.Info("a group is led here again, or its lead is on its way here; handing it over")
			cl.StepDown(dctx)
			quietFrom = time.Now()
			continue
		}
		last := srv.LastMoved()
		if last.Before(quietFrom) {
			last = quietFrom
		}
		if time.Since(last) >= drainQuiet {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	log.Info("groups handed over; clients redirected", "handover", handed.Sub(start).Round(time.Millisecond),
		"drain", time.Since(handed).Round(time.Millisecond))
}

// drainQuiet and drainMax bound how long a stopping cluster node keeps
// answering MOVED after it handed its groups over (see stepDown).
const (
	drainQuiet = 500 * time.Millisecond
	drainMax   = 5 * time.Second
)

// startHTTP serves the HTTP API on addr ("" disables it), refusing
// connections while maxConns client connections are open (counted in
// open, which the RESP server shares), over TLS when tc is not nil.
func startHTTP(addr string, h http.Handler, maxConns int, open *atomic.Int64, tc *tls.Config, log *slog.Logger) (*http.Server, net.Listener, error) {
	if addr == "" {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s (--http): %w", addr, err)
	}
	hs := newHTTPServer(h, defaultHTTPTimeouts(), log)
	var served net.Listener = newLimitListener(ln, maxConns, open)
	if tc != nil {
		served = tls.NewListener(served, tc)
	}
	go func() {
		if err := hs.Serve(served); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server failed", "err", err)
		}
	}()
	return hs, ln, nil
}

func addrOf(ln net.Listener) net.Addr {
	if ln == nil {
		return nil
	}
	return ln.Addr()
}

// shardCount returns the shards of every store.
func shardCount(stores []*shards.Store) int {
	n := 0
	for _, s := range stores {
		n += s.Shards()
	}
	return n
}

// sweepGrace is how long the background sweep leaves a key whose state
// has expired. Until then a check of the key reuses its record in place
// (expired state acts as a fresh key either way), so that a key checked
// about as often as its state lasts is not dropped and re-inserted each
// time; memory still follows the active keys within a second.
const sweepGrace = time.Second

// sweep drops expired keys in the background, a bounded slice of each of
// the node's stores at a time, from one goroutine: a cluster node has a
// store per group it hosts, and the stores are asked for each round, so
// that a replica added after start (a join, a group moved here) is swept
// too. A round that finds nothing to drop makes the next one wait twice
// as long, up to a second, so that stores whose keys do not expire are
// not scanned ten times a second for nothing; one that drops keys resets
// the pace.
//
// now is the node's clock: the sweep drops what has expired by it, so a
// step of the wall clock drops nothing the checks would still count.
func sweep(ctx context.Context, stores func() []*shards.Store, now func() int64) {
	t := time.NewTimer(sweepPace)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if sweepOnce(stores(), now()-int64(sweepGrace)) > 0 {
			idle = 0
		} else {
			idle = min(2*idle+1, 9)
		}
		t.Reset(time.Duration(idle+1) * sweepPace) // asleep between sweeps, not ticking
	}
}

// sweepOnce sweeps each store once, dropping what expired by cut, and
// returns how many keys it dropped.
func sweepOnce(stores []*shards.Store, cut int64) int {
	dropped := 0
	for _, s := range stores {
		dropped += s.Sweep(cut, 32)
	}
	return dropped
}

// sweepPace is the background sweep's shortest pause.
const sweepPace = 100 * time.Millisecond

// restGovernor returns the governor that runs an idle process's Go code on
// one core (package rest), or nil: only for the process main runs (a
// test's process keeps its parallelism), with --rest-after, --procs 0 and
// no GOMAXPROCS in the environment (the operator chose the cores then),
// and more than one core to give up.
func restGovernor(cfg Config, log *slog.Logger) *rest.Governor {
	if !cfg.process || cfg.RestAfter <= 0 || cfg.Procs != 0 || os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	g := rest.New(cfg.RestAfter)
	g.OnChange = func(resting bool) {
		msg := "idle: Go code runs on every core"
		if resting {
			msg = "idle: Go code runs on one core"
		}
		log.Debug(msg, "gomaxprocs", runtime.GOMAXPROCS(0))
	}
	return g
}
