// Command rlsbench sends the same ShouldRateLimit load to Envoy rate limit
// services (rlserver's --grpc, envoyproxy/ratelimit) and reports each
// one's throughput and latency percentiles at equal concurrency.
//
//	rlsbench -addr 127.0.0.1:8081 -c 32 -d 10s -keys 10000
//
// Each request carries one descriptor, remote_address=<one of -keys
// addresses>, in domain "bench" (bench/rlsbench.yaml gives both servers
// the same limit).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "the rate limit service's gRPC address")
	name := flag.String("name", "", "label of the result line")
	conc := flag.Int("c", 32, "concurrent callers")
	conns := flag.Int("conns", 4, "gRPC connections the callers share")
	dur := flag.Duration("d", 10*time.Second, "how long to send")
	keys := flag.Int("keys", 10000, "distinct descriptor values")
	flag.Parse()
	var clients []pb.RateLimitServiceClient
	for i := 0; i < *conns; i++ {
		cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer cc.Close()
		clients = append(clients, pb.NewRateLimitServiceClient(cc))
	}
	var errs, over atomic.Int64
	lat := make([][]time.Duration, *conc)
	deadline := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%len(clients)]
			for i := w; time.Now().Before(deadline); i += *conc {
				req := &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{{
					Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: fmt.Sprintf("10.0.%d.%d", (i%*keys)/256, i%256)}}}}}
				start := time.Now()
				resp, err := c.ShouldRateLimit(context.Background(), req)
				lat[w] = append(lat[w], time.Since(start))
				if err != nil {
					errs.Add(1)
				} else if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
					over.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[int(float64(len(all)-1)*p)]
	}
	fmt.Printf("%-22s c=%d requests=%d rps=%.0f p50=%v p99=%v p999=%v over_limit=%d errors=%d\n", *name, *conc, len(all),
		float64(len(all))/dur.Seconds(), pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond),
		pct(0.999).Round(time.Microsecond), over.Load(), errs.Load())
}
