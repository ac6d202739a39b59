package envoyrls_test

import (
	"context"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/internal/testserver"
)

// TestHostileInput: huge requests get clear errors (nothing is read into
// memory beyond the bound), and a RESP client of the same store keeps its
// latency while connections hold the gRPC port with slow streams.
func TestHostileInput(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	many := &pb.RateLimitRequest{Domain: "api"}
	for i := 0; i < 10000; i++ {
		many.Descriptors = append(many.Descriptors, desc("remote_address", "x"))
	}
	if _, err := r.call(many); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("10,000 descriptors: %v", err)
	}
	many.Descriptors = many.Descriptors[:65]
	if _, err := r.call(many); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "too many descriptors: 65, at most 64") {
		t.Fatalf("65 descriptors: %v", err)
	}
	big := strings.Repeat("v", 1<<20)
	if _, err := r.call(&pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", big)}}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("1 MB value: %v", err)
	}
	long := strings.Repeat("v", 2000)
	if _, err := r.call(&pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", long)}}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "too long") {
		t.Fatalf("2000-byte value: %v", err)
	}
	for _, req := range []*pb.RateLimitRequest{{Domain: "", Descriptors: many.Descriptors[:1]}, {Domain: "api"}} {
		if _, err := r.call(req); status.Code(err) != codes.Unknown { // as envoyproxy/ratelimit answers
			t.Fatalf("%v: %v", req, err)
		}
	}
	// The service still answers.
	if resp := r.ask("api", desc("remote_address", "fine")); resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("after the hostile requests: %v", resp)
	}
}

// TestSlowStreamsLeaveRESPAlone: 200 connections to the gRPC port that
// send half a preface, or the preface and SETTINGS and then nothing, do
// not slow a RESP client of a server in the same process (its p99 against
// a reference taken in the same test, with a generous factor), and the
// service still answers a well-behaved client.
func TestSlowStreamsLeaveRESPAlone(t *testing.T) {
	node := testserver.Start(t, testserver.Options{})
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	t.Cleanup(func() { rdb.Close() })
	p99 := func() time.Duration {
		var d []time.Duration
		for i := 0; i < 300; i++ {
			start := time.Now()
			if err := rdb.Do(context.Background(), "RL.CHECK", "bystander", "fixed", 1000000, "1h").Err(); err != nil {
				t.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)*99/100]
	}
	ref := p99()
	var conns []net.Conn
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 0 {
			c.Write([]byte("PRI * HTTP/2.0\r\n")) // half a preface, then nothing
		} else {
			c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")) // preface and SETTINGS, then nothing
		}
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	during := p99()
	if limit := 10*ref + 50*time.Millisecond; during > limit {
		t.Fatalf("RESP p99 %v with slow gRPC clients, reference %v (limit %v)", during, ref, limit)
	}
	if resp := r.ask("api", desc("remote_address", "fine")); resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("with slow clients: %v", resp)
	}
	t.Logf("RESP p99: %v alone, %v beside 200 slow gRPC connections", ref, during)
}
