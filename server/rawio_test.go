package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
)

// TestRoundTripsNeverStall: many connections doing one request per round
// trip, requests split across writes with pauses, and batches larger than
// the read buffer, all get every reply: the connection loop that waits
// for the netpoller after a read that emptied the socket never misses
// bytes that arrived meanwhile. 16 connections of 120 round trips each;
// TestLongRoundTripsNeverStall (make test-long) does 1,200 each.
func TestRoundTripsNeverStall(t *testing.T) {
	roundTripsNeverStall(t, 120)
}

// TestLongRoundTripsNeverStall is TestRoundTripsNeverStall ten times as
// long: a missed wakeup is a matter of timing, and more round trips give
// it more chances to show.
func TestLongRoundTripsNeverStall(t *testing.T) {
	testutil.LongOnly(t)
	roundTripsNeverStall(t, 1200)
}

func roundTripsNeverStall(t *testing.T, rounds int) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			errs <- roundTrips(addr, g, rounds)
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func roundTrips(addr string, g, rounds int) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	rd := bufio.NewReader(nc)
	for i := 0; i < rounds; i++ {
		// A deadline per round trip: a stall is one that never completes,
		// while all of them together may take long on a busy machine.
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		msg := fmt.Sprintf("m%d-%d", g, i)
		req := resp("ECHO", msg)
		switch i % 3 {
		case 0:
			_, err = io.WriteString(nc, req)
		case 1: // split mid-request, with a pause
			io.WriteString(nc, req[:5])
			time.Sleep(200 * time.Microsecond)
			_, err = io.WriteString(nc, req[5:])
		case 2: // a batch bigger than the read buffer, then the request
			big := strings.Repeat(resp("PING"), initialReadBuf/14*3)
			_, err = io.WriteString(nc, big+req)
		}
		if err != nil {
			return err
		}
		if i%3 == 2 {
			for k := 0; k < initialReadBuf/14*3; k++ {
				if line, err := rd.ReadString('\n'); err != nil || line != "+PONG\r\n" {
					return fmt.Errorf("conn %d req %d: PING reply %q, %v", g, i, line, err)
				}
			}
		}
		want := "$" + itoa(len(msg)) + "\r\n" + msg + "\r\n"
		got := make([]byte, len(want))
		if _, err := io.ReadFull(rd, got); err != nil || string(got) != want {
			return fmt.Errorf("conn %d req %d: got %q, %v; want %q", g, i, got, err, want)
		}
	}
	return nil
}

// TestConnWithoutDescriptor: a net.Conn without a file descriptor (TLS,
// pipes) is served through its own Read and Write, pipelining included.
func TestConnWithoutDescriptor(t *testing.T) {
	s := New(Config{Limiter: shards.New(1), Clock: fakeClock()})
	client, server := net.Pipe()
	defer client.Close()
	c := s.newConn(server)
	c.attach(server)
	if c.raw != nil {
		t.Fatal("a pipe got a raw socket")
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.cfg.OpenClients.Add(1)
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serveConn(c)
	client.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(client)
	go io.WriteString(client, resp("PING")+resp("RL.CHECK", "k", "fixed", "10", "1m")+"ECHO hi\r\n")
	want := "+PONG\r\n" + ints(1, 10, 9, 0, 60000) + "$2\r\nhi\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(rd, got); err != nil || string(got) != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	go io.WriteString(client, resp("QUIT"))
	if line, _ := rd.ReadString('\n'); line != "+OK\r\n" {
		t.Fatalf("QUIT: %q", line)
	}
	s.wg.Wait()
}
