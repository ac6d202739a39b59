package main

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// reservedFDs are the file descriptors --maxclients leaves for everything
// but client connections (listeners, event loops, log and data files), as
// Redis reserves some.
const reservedFDs = 64

// clientBudgets returns --maxclients and --grpc-maxclients (grpcWant 0
// when there is no gRPC listener), both lowered in proportion, with a
// warning, when the process may not open that many files besides
// reservedFDs (ulimit -n), as Redis lowers maxclients: a server out of
// descriptors cannot even refuse a connection politely.
func clientBudgets(want, grpcWant int, log *slog.Logger) (clients, grpcClients int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return want, grpcWant
	}
	clients, grpcClients = fitBudgets(want, grpcWant, rl.Cur)
	if clients < want || grpcClients < grpcWant {
		log.Warn("the open file limit is too low for --maxclients and --grpc-maxclients: serving fewer clients (raise ulimit -n)",
			"maxclients", want, "grpc_maxclients", grpcWant, "open_file_limit", rl.Cur, "reserved", reservedFDs,
			"serving", clients, "serving_grpc", grpcClients)
	}
	return clients, grpcClients
}

// fitBudgets shares the files left besides reservedFDs between the two
// budgets in proportion to what each wants, when they do not both fit;
// each keeps at least one.
func fitBudgets(want, grpcWant int, files uint64) (int, int) {
	if files >= uint64(want+grpcWant+reservedFDs) {
		return want, grpcWant
	}
	room := max(int(min(files, 1<<30))-reservedFDs, 1)
	g := 0
	if grpcWant > 0 {
		g = max(room*grpcWant/(want+grpcWant), 1)
	}
	return max(room-g, 1), g
}

// httpTimeouts bound how long an HTTP client may take, so that slow or
// idle clients cannot hold connections for ever.
type httpTimeouts struct {
	readHeader, read, write, idle time.Duration
}

// defaultHTTPTimeouts: a request's headers within 10 s, the whole request
// (at most 1 MiB) within 30 s, its response within 30 s, and 2 minutes
// between requests on a kept-alive connection.
func defaultHTTPTimeouts() httpTimeouts {
	return httpTimeouts{readHeader: 10 * time.Second, read: 30 * time.Second,
		write: 30 * time.Second, idle: 2 * time.Minute}
}

// newHTTPServer returns the HTTP server of h with timeouts t and headers
// bounded to 64 KiB.
func newHTTPServer(h http.Handler, t httpTimeouts, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read,
		WriteTimeout: t.write, IdleTimeout: t.idle, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}

// limitListener closes the connections it accepts when max client
// connections are open, counted in open. The RESP server shares the HTTP
// listener's count (server.Config.OpenClients): --maxclients bounds RESP
// and HTTP clients together, so that they cannot take every file
// descriptor between them (net/http itself backs off when Accept fails
// for want of them). The gRPC listener counts apart (--grpc-maxclients),
// so that gRPC clients cannot lock out RESP clients or /healthz.
type limitListener struct {
	net.Listener
	max  int64
	open *atomic.Int64
}

func newLimitListener(ln net.Listener, max int, open *atomic.Int64) *limitListener {
	return &limitListener{Listener: ln, max: int64(max), open: open}
}

// Accept returns the next connection for which there is room.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		c.Close()
	}
}

// limitedConn gives its slot back when it is closed, once.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and gives its slot back.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// listen listens on addr, over TLS when tc is not nil.
func listen(addr string, tc *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || tc == nil {
		return ln, err
	}
	return tls.NewListener(ln, tc), nil
}

// warnExposed warns when the server listens beyond the loopback interface
// without --requirepass: anyone who can reach it may then use it, rules
// included unless --admin-token is set.
func warnExposed(cfg Config, log *slog.Logger) {
	if cfg.RequirePass != "" {
		return
	}
	for _, addr := range []string{cfg.Listen, cfg.HTTP} {
		if addr != "" && !loopback(addr) {
			log.Warn("listening beyond the loopback interface without --requirepass: anyone who can reach "+
				"this address can use the server; set --requirepass (and --admin-token), or listen on 127.0.0.1",
				"addr", addr)
		}
	}
}

// loopback reports whether addr (host:port) can only be reached from this
// machine: a loopback IP or localhost. An empty host is every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
