package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
)

// rlserver rls-check [--grpc addr] [--domain d] [--token t] [--tls] k=v[,k=v...] ...
//
// runRLSCheck sends one ShouldRateLimit to the rate limit service at
// --grpc, one descriptor per argument ("remote_address=10.0.0.1" or
// "tenant=acme,user=alice"), prints the answer as JSON (protobuf's JSON
// form, as POST /json answers) and returns 0 when it answered, 1 when it
// could not, 2 for bad usage. It is the client a FROM scratch image
// carries: one container of the image asks another, as Envoy would.
func runRLSCheck(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rlserver rls-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("grpc", defaultGRPC, "the rate limit service's gRPC address")
	domain := fs.String("domain", "", "the request's domain (required)")
	token := fs.String("token", getenv("RLSERVER_REQUIREPASS"), "bearer token sent as 'authorization: Bearer <token>' (default RLSERVER_REQUIREPASS)")
	hits := fs.Uint("hits", 0, "the request's hits_addend (0 counts as 1)")
	useTLS := fs.Bool("tls", false, "TLS, not verifying the certificate")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *domain == "" || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "rlserver rls-check: want --domain and at least one descriptor (key=value[,key=value...])")
		return 2
	}
	req := &pb.RateLimitRequest{Domain: *domain, HitsAddend: uint32(*hits)}
	for _, a := range fs.Args() {
		d := &rlpb.RateLimitDescriptor{}
		for _, kv := range strings.Split(a, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				fmt.Fprintf(stderr, "rlserver rls-check: descriptor %q: want key=value[,key=value...]\n", a)
				return 2
			}
			d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	creds := insecure.NewCredentials()
	if *useTLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintln(stderr, "rlserver rls-check:", err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*token)
	}
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
	if err != nil {
		fmt.Fprintln(stderr, "rlserver rls-check:", err)
		return 1
	}
	out, _ := protojson.Marshal(resp)
	fmt.Fprintln(stdout, string(out))
	return 0
}
