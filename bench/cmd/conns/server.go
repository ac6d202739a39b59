package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/internal/rlproc"
)

// server is rlserver under ulimit -n.
type server struct {
	resp, http string
	cmd        *exec.Cmd
	exited     chan error
	log        *os.File
	once       sync.Once
	stopErr    error
}

// freePort returns a 127.0.0.1 address on a port that was free a moment
// ago.
func freePort() (string, error) {
	port, err := rlproc.FreePort()
	return "127.0.0.1:" + strconv.Itoa(port), err
}

func start(o options, dir string) (*server, error) {
	resp, err := freePort()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(o.rlserver)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "rlserver.log"))
	if err != nil {
		return nil, err
	}
	s := &server{resp: resp, http: httpAddr, log: logf, exited: make(chan error, 1)}
	s.cmd = exec.Command("bash", "-c", "ulimit -n "+strconv.Itoa(o.ulimit)+` && exec "$0" "$@"`, bin,
		"--listen", resp, "--http", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.exited <- s.cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ping(resp, time.Second) == "+PONG" {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("rlserver did not start")
		}
	}
}

// up reports whether the process is still running.
func (s *server) up() bool {
	select {
	case err := <-s.exited:
		s.exited <- err
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() error {
	s.once.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.exited:
			s.stopErr = err
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			s.stopErr = errors.New("no exit within 15 s of SIGTERM")
		}
		s.log.Close()
	})
	return s.stopErr
}

// logLines counts the server's log lines that contain substr.
func (s *server) logLines(substr string) int {
	b, _ := os.ReadFile(s.log.Name())
	return strings.Count(string(b), substr)
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
