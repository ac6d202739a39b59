package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// rlserver health [--http addr] [--timeout d] [--tls]
//
// runHealth asks the node at --http for GET /readyz and returns the exit
// status: 0 if it answered 200 (it can serve checks), 1 if not or if it
// could not be reached, 2 for a bad flag. When the node serves Envoy's
// rate limit service (/readyz names its gRPC address in GRPCHeader), its
// grpc.health.v1 must answer SERVING too. It is the image's HEALTHCHECK: a
// FROM scratch image has no shell or curl. --http defaults to
// RLSERVER_HTTP (the address the node in the same container serves), with
// an unspecified host (0.0.0.0, ::) read as 127.0.0.1; --tls (default: on
// when RLSERVER_TLS_CERT is set) speaks HTTPS without verifying the
// certificate, which is the node's own.
func runHealth(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rlserver health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := getenv("RLSERVER_HTTP")
	if addr == "" {
		addr = defaultHTTP
	}
	fs.StringVar(&addr, "http", addr, "the node's HTTP address (default RLSERVER_HTTP, else "+defaultHTTP+")")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	useTLS := fs.Bool("tls", getenv("RLSERVER_TLS_CERT") != "", "HTTPS, not verifying the certificate (default: on when RLSERVER_TLS_CERT is set)")
	// A bad flag is one line and a hint, as the server's own flags are;
	// the flags' list is for --help.
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "Usage: rlserver health [--http addr] [--timeout 3s] [--tls]\n\n"+
			"Exits 0 if the node at --http is ready (GET /readyz answers 200), 1 if not, 2 on a bad flag.\n\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "rlserver health: %v (see rlserver health --help)\n", err)
		return 2
	}
	url, err := readyURL(addr, *useTLS)
	if err != nil {
		fmt.Fprintln(stderr, "rlserver health:", err)
		return 2
	}
	hc := &http.Client{Timeout: *timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the node's own certificate, over loopback
	res, err := hc.Get(url)
	if err != nil {
		fmt.Fprintln(stderr, "rlserver health: not healthy:", err)
		return 1
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "rlserver health: not ready: %s %s\n", res.Status, strings.TrimSpace(string(body)))
		return 1
	}
	if g := res.Header.Get(GRPCHeader); g != "" {
		addr, tlsOn := strings.CutSuffix(g, "; tls")
		if err := grpcServing(addr, tlsOn, *timeout); err != nil {
			fmt.Fprintf(stderr, "rlserver health: the rate limit service (gRPC %s) is not serving: %v\n", addr, err)
			return 1
		}
		fmt.Fprintln(stdout, "rlserver health: ready; the rate limit service (gRPC "+addr+") is serving")
		return 0
	}
	fmt.Fprintln(stdout, "rlserver health: ready")
	return 0
}

// grpcServing asks grpc.health.v1 Check ("", open without a token) of the
// server at addr, an unspecified host read as 127.0.0.1.
func grpcServing(addr string, useTLS bool, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	creds := insecure.NewCredentials()
	if useTLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) // the node's own certificate, over loopback
	}
	conn, err := grpc.NewClient(net.JoinHostPort(host, port), grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("status %v", resp.Status)
	}
	return nil
}

// readyURL returns the /readyz URL of the node serving HTTP on addr.
func readyURL(addr string, useTLS bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http %q: want host:port", addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/readyz", nil
}
