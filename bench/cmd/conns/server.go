package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/internal/rlproc"
)

// server is rlserver under ulimit -n.
type server struct {
	resp, http string
	p          *rlproc.Proc
	log        *os.File
	once       sync.Once
	stopErr    error
}

// start starts rlserver under bash's ulimit -n o.ulimit on free ports, its
// output to <dir>/rlserver.log, and waits up to 10 s until it answers
// PING (rlproc.OnFreeAddrs: it is started again on others should another
// process have taken one of its ports).
func start(o options, dir string) (*server, error) {
	bin, err := filepath.Abs(o.rlserver)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "rlserver.log"))
	if err != nil {
		return nil, err
	}
	s := &server{log: logf}
	s.p, err = rlproc.OnFreeAddrs(2, func(addrs []string) (*rlproc.Proc, error) {
		s.resp, s.http = addrs[0], addrs[1]
		p, err := rlproc.Start("rlserver", "bash", []string{"-c", "ulimit -n " + strconv.Itoa(o.ulimit) + ` && exec "$0" "$@"`, bin,
			"--listen", s.resp, "--http", s.http, "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn"}, logf)
		if err != nil {
			return nil, err
		}
		return p, p.WaitPing(s.resp, 10*time.Second, func() error { return rlproc.Ping(s.resp) })
	})
	if err != nil {
		if s.p != nil {
			s.p.Kill()
		}
		logf.Close()
		return nil, err
	}
	return s, nil
}

// up reports whether the process is still running.
func (s *server) up() bool { return s.p.Alive() }

// stop sends SIGTERM and waits for a clean exit (status 0 within 15 s;
// killed after).
func (s *server) stop() error {
	s.once.Do(func() {
		s.stopErr = s.p.Stop(15 * time.Second)
		s.log.Close()
	})
	return s.stopErr
}

// logLines counts the server's log lines that contain substr.
func (s *server) logLines(substr string) int {
	return strings.Count(s.p.Log().String(), substr)
}

// ping dials addr, sends PING and returns the reply line, or the error.
func ping(addr string, timeout time.Duration) string {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err.Error()
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(timeout))
	io.WriteString(nc, "PING\r\n")
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(line)
}

// inspector is a connection opened first, for INFO: a new one may well
// be refused.
type inspector struct {
	nc net.Conn
	rd *bufio.Reader
}

func inspect(addr string) (*inspector, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &inspector{nc: nc, rd: bufio.NewReader(nc)}, nil
}

// info returns one integer field of INFO, -1 if it cannot.
func (in *inspector) info(field string) int64 {
	in.nc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(in.nc, "INFO\r\n")
	rd := in.rd
	head, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return -1
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	body := make([]byte, n+2) // and its CRLF
	if _, err := io.ReadFull(rd, body); err != nil {
		return -1
	}
	for _, line := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			x, _ := strconv.ParseInt(v, 10, 64)
			return x
		}
	}
	return -1
}
