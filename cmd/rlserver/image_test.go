package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestImageNonRootAndHealthy: a container of our image runs the server as
// uid 65532 — the image says so (Config.User), docker top shows it, and
// every file the server wrote in a fresh /data volume is owned by 65532;
// a tmpfs mounted for that uid, as the partition tests mount it, works
// too — serves checks, and Docker's health check
// (`rlserver health` in a FROM scratch image) reports it "healthy"; a
// docker stop ends it with status 0.
func TestImageNonRootAndHealthy(t *testing.T) {
	parallel(t)
	testutil.RequireDocker(t)
	e := newPartEnv(t)
	if user := mustDocker(t, "image", "inspect", "-f", "{{.Config.User}}", e.image); user != "65532:65532" {
		t.Fatalf("the image's user is %q, want 65532:65532", user)
	}
	// A tmpfs is root's unless told otherwise: the partition tests mount
	// it for uid 65532, as an operator must.
	for _, data := range [][]string{{"-v", "/data"}, {"--tmpfs", "/data:uid=65532,gid=65532"}} {
		name := fmt.Sprintf("%s-%s", e.prefix, strings.TrimPrefix(data[0], "--"))
		args := append([]string{"run", "-d", "--name", name, "--label", "rlserver-test=" + e.prefix,
			"-p", "127.0.0.1::6379", "-p", "127.0.0.1::8080"}, data...)
		mustDocker(t, append(args, e.image)...)
		cleanupDocker(t, "rm", "-f", "-v", name)
		time.Sleep(time.Second)
		if running := mustDocker(t, "inspect", "-f", "{{.State.Running}}", name); running != "true" {
			logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Fatalf("%s is not running:\n%s", name, logs)
		}
		resp := e.published(name, "6379/tcp")
		rdb := redis.NewClient(&redis.Options{Addr: resp, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		testutil.WaitFor(t, 30*time.Second, name+" serving checks", func() bool {
			return rdb.Do(context.Background(), "RL.CHECK", "k", "fixed", 5, "1m").Err() == nil
		})
		var health string
		testutil.WaitFor(t, 90*time.Second, name+" healthy", func() bool {
			health = mustDocker(t, "inspect", "-f", "{{.State.Health.Status}}", name)
			if health == "unhealthy" {
				logs, _ := exec.Command("docker", "inspect", "-f", "{{json .State.Health}}", name).CombinedOutput()
				t.Fatalf("%s unhealthy: %s", name, logs)
			}
			return health == "healthy"
		})
		if uids := processUIDs(t, name); len(uids) != 1 || uids[0] != "65532" {
			t.Fatalf("%s: the server runs as uid %v, want 65532", name, uids)
		}
		if data[0] == "-v" { // docker cp does not see into a tmpfs
			owners := dataOwners(t, name)
			if len(owners) < 3 {
				t.Fatalf("%s: only %d entries in /data: %v", name, len(owners), owners)
			}
			for path, uid := range owners {
				if uid != 65532 {
					t.Errorf("%s: %s is owned by uid %d, want 65532", name, path, uid)
				}
			}
		}
		mustDocker(t, "stop", name)
		if code := mustDocker(t, "inspect", "-f", "{{.State.ExitCode}}", name); code != "0" {
			t.Fatalf("%s exited %s after docker stop, want 0", name, code)
		}
	}
}

// processUIDs returns the uid of each process of the container, as
// docker top (ps on the host) shows it.
func processUIDs(t *testing.T, container string) []string {
	t.Helper()
	lines := strings.Split(mustDocker(t, "top", container, "-o", "pid,uid"), "\n")
	var uids []string
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) == 2 {
			uids = append(uids, f[1])
		}
	}
	return uids
}

// dataOwners returns the uid of every entry of the container's /data, as
// `docker cp` archives it.
func dataOwners(t *testing.T, container string) map[string]int {
	t.Helper()
	out, err := exec.Command("docker", "cp", container+":/data", "-").Output()
	if err != nil {
		t.Fatalf("docker cp: %v", err)
	}
	owners := map[string]int{}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return owners
		}
		if err != nil {
			t.Fatal(err)
		}
		owners[h.Name] = h.Uid
	}
}

// TestImageRLSAcrossContainers: a container of our image on a
// user-defined network answers ShouldRateLimit from another container of
// the same image (`rlserver rls-check`, the client it carries), as Envoy
// in its own container asks; the image's gRPC listener is on every
// interface, 8081 is exposed, and its HEALTHCHECK, which then asks
// grpc.health.v1 too, reports it healthy.
func TestImageRLSAcrossContainers(t *testing.T) {
	parallel(t)
	testutil.RequireDocker(t)
	e := &partEnv{t: t, prefix: fmt.Sprintf("rlrls-%08x", rand.Uint32())}
	e.buildImage()
	if exposed := mustDocker(t, "image", "inspect", "-f", "{{json .Config.ExposedPorts}}", e.image); !strings.Contains(exposed, `"8081/tcp"`) {
		t.Fatalf("the image exposes %s, want 8081/tcp among them", exposed)
	}
	conf := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(conf, []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: day, unit_multiplier: 366, requests_per_unit: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	netName := e.prefix + "-net"
	mustDocker(t, "network", "create", "--label", "rlserver-test="+e.prefix, netName)
	cleanupDocker(t, "network", "rm", netName)
	server := e.prefix + "-rls"
	mustDocker(t, "run", "-d", "--name", server, "--label", "rlserver-test="+e.prefix, "--network", netName,
		"-v", conf+":/etc/rls.yaml:ro", "-e", "RLSERVER_ENVOY_CONFIG=/etc/rls.yaml", "--tmpfs", "/data:uid=65532,gid=65532", e.image)
	cleanupDocker(t, "rm", "-f", "-v", server)
	ask := func() string {
		out, err := dockerRun("run", "--rm", "--label", "rlserver-test="+e.prefix, "--network", netName, e.image,
			"rls-check", "--grpc", server+":8081", "--domain", "edge", "remote_address=10.0.0.7")
		if err != nil {
			logs, _ := exec.Command("docker", "logs", server).CombinedOutput()
			t.Fatalf("rls-check from another container: %v\n%s\nthe server's log:\n%s", err, out, logs)
		}
		return out
	}
	var first string
	testutil.WaitFor(t, 30*time.Second, "the service answering another container", func() bool {
		out, err := dockerRun("run", "--rm", "--label", "rlserver-test="+e.prefix, "--network", netName, e.image,
			"rls-check", "--grpc", server+":8081", "--domain", "edge", "--timeout", "2s", "probe=x")
		first = out
		return err == nil
	})
	for i, want := range []string{`"limitRemaining":1`, `"overallCode":"OK"`, `"overallCode":"OVER_LIMIT"`} {
		if got := ask(); !strings.Contains(got, want) || !strings.Contains(got, `"requestsPerUnit":2`) {
			t.Fatalf("request %d: %s, want %s (first answer: %s)", i+1, got, want, first)
		}
	}
	testutil.WaitFor(t, 90*time.Second, server+" healthy", func() bool {
		h := mustDocker(t, "inspect", "-f", "{{.State.Health.Status}}", server)
		if h == "unhealthy" {
			logs, _ := exec.Command("docker", "inspect", "-f", "{{json .State.Health}}", server).CombinedOutput()
			t.Fatalf("%s unhealthy: %s", server, logs)
		}
		return h == "healthy"
	})
	if log := mustDocker(t, "inspect", "-f", "{{json .State.Health.Log}}", server); !strings.Contains(log, "rate limit service") {
		t.Fatalf("the health check did not ask the rate limit service: %s", log)
	}
}
