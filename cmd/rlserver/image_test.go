package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestImageNonRootAndHealthy: a container of our image runs the server as
// uid 65532 — the image says so (Config.User), docker top shows it, and
// every file the server wrote in a fresh /data volume is owned by 65532;
// a tmpfs mounted for that uid, as the partition tests mount it, works
// too — serves checks, and Docker's health check
// (`rlserver health` in a FROM scratch image) reports it "healthy"; a
// docker stop ends it with status 0.
func TestImageNonRootAndHealthy(t *testing.T) {
	requireDocker(t)
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
		waitFor(t, 30*time.Second, name+" serving checks", func() bool {
			return rdb.Do(context.Background(), "RL.CHECK", "k", "fixed", 5, "1m").Err() == nil
		})
		var health string
		waitFor(t, 90*time.Second, name+" healthy", func() bool {
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
