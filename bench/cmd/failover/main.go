// Command failover measures how long a three-node rlserver cluster takes
// to serve every key again after the node leading the most groups is
// killed with SIGKILL, as the cluster reports it and as clients see it,
// and writes <out>/<name>.md and <name>.json.
//
// Each of -runs runs starts a fresh cluster (strong mode by default),
// waits until every group is served by its preferred leader, and runs a
// steady load: -workers workers, each checking its own keys one request
// at a time (RL.CHECK fo:<worker>:<i> fixed 1000000 1h, -keys-per-group
// keys in every group), routed by slot as a cluster client does (bench/load's
// Router: MOVED followed, TRYAGAIN and CLUSTERDOWN retried after 10 ms,
// CLUSTER SLOTS reloaded after errors at most every 100 ms). After -steady
// of load (its p99 recorded) the node leading the most groups is killed,
// and the run measures (a) the time until GET /cluster on a survivor shows
// every group with a ready replica on a live node, (b) the time until every
// worker has had a successful reply, to a request sent after the kill, for
// every key it checks, and (c) the errors the clients met meanwhile, by
// kind. The survivors are then stopped with SIGTERM and must exit with 0.
//
//	make failover
//	go run ./bench/cmd/failover -runs 1 -consistency fast -name failover-fast -out /tmp/fo
package main

import (
	"flag"
	"fmt"
	"github.com/rlserver/rlserver/bench/nodes"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type options struct {
	rlserver     string
	out, name    string
	runs         int
	consistency  string
	workers      int
	keysPerGroup int
	groups       int
	procs        int
	extra        string
	warmup       time.Duration
	steady       time.Duration
	timeout      time.Duration
	goal         time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.rlserver, "rlserver", "bin/rlserver", "rlserver binary (make build)")
	flag.StringVar(&o.out, "out", "bench/results", "directory for the results")
	flag.StringVar(&o.name, "name", "failover", "name of the result files: <out>/<name>.md and .json")
	flag.IntVar(&o.runs, "runs", 5, "runs, each on a fresh cluster; the report gives every run and the medians")
	flag.StringVar(&o.consistency, "consistency", "strong", "the nodes' --consistency: strong or fast")
	flag.IntVar(&o.workers, "workers", 8, "client workers, each with its own connections and keys, one request at a time")
	flag.IntVar(&o.keysPerGroup, "keys-per-group", 2, "keys each worker checks in every group")
	flag.IntVar(&o.groups, "groups", 16, "the cluster's --groups")
	flag.IntVar(&o.procs, "procs", 0, "the nodes' --procs (0: not given)")
	flag.StringVar(&o.extra, "flags", "", "extra rlserver flags for every node, space-separated")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "load before the steady window")
	flag.DurationVar(&o.steady, "steady", 3*time.Second, "steady window before the kill, over which p99 is measured")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Second, "longest wait for full service after the kill")
	flag.DurationVar(&o.goal, "goal", 2*time.Second, "the goal for full service after the kill")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

func (o options) nodeFlags() []string {
	f := []string{"--consistency", o.consistency, "--groups", fmt.Sprint(o.groups)}
	if o.procs > 0 {
		f = append(f, "--procs", fmt.Sprint(o.procs))
	}
	return append(f, strings.Fields(o.extra)...)
}

func run(o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "failover")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sum := &Summary{Machine: nodes.Machine(nil), Options: o.summary(), Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	for i := 1; i <= o.runs; i++ {
		r, err := runOnce(o, filepath.Join(dir, fmt.Sprintf("run%d", i)), i)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		fmt.Println(r.line())
		sum.Runs = append(sum.Runs, r)
	}
	sum.evaluate(o.goal)
	if err := sum.write(o); err != nil {
		return err
	}
	fmt.Print(sum.markdown())
	return nil
}

func (o options) summary() map[string]string {
	return map[string]string{
		"runs": fmt.Sprint(o.runs), "consistency": o.consistency, "workers": fmt.Sprint(o.workers),
		"keys_per_group": fmt.Sprint(o.keysPerGroup), "groups": fmt.Sprint(o.groups), "warmup": o.warmup.String(),
		"steady": o.steady.String(), "timeout": o.timeout.String(), "goal": o.goal.String(),
		"flags": strings.Join(o.nodeFlags(), " "),
	}
}
