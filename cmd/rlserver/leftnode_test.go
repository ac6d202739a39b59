package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// leftMsg is the line a node that left the cluster logs once.
const leftMsg = "this node has left the cluster"

// TestLeftNodeSaysSoOnce: a node that left the cluster (RL.CLUSTER.LEAVE)
// and keeps running says once what it is and what to do, and does not
// repeat raft's election chatter (`heartbeat timeout reached`, a line a
// minute with how many it stood for) as it waits for a leader that no
// longer counts it. The node that leaves is not the meta group's leader,
// whose raft stops once it removes itself.
func TestLeftNodeSaysSoOnce(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	procs := clusterProcsN(t, bin, 3, 4)
	r, err := report(procs[0], "")
	if err != nil {
		t.Fatal(err)
	}
	leaving := -1
	for i, p := range procs {
		if name := nodeAt(r, p.resp); name != r.MetaLeader && name != "" && i > 0 {
			leaving = i
		}
	}
	if leaving < 0 {
		t.Fatalf("no node but the meta leader %q and the first: %+v", r.MetaLeader, r)
	}
	name := nodeAt(r, procs[leaving].resp)
	if err := procs[0].client.Do(context.Background(), "RL.CLUSTER.LEAVE", name).Err(); err != nil {
		t.Fatalf("RL.CLUSTER.LEAVE %s: %v", name, err)
	}
	testutil.WaitFor(t, 40*time.Second, name+" forgotten", func() bool {
		r, err := report(procs[0], "")
		return err == nil && !hasNode(r, name)
	})
	left := procs[leaving].logs
	testutil.WaitFor(t, 10*time.Second, name+" says it left", func() bool { return strings.Contains(left.String(), leftMsg) })
	// Raft's election timer fires every heartbeat timeout or so: before
	// the fix, the first such line came within a second of the removal.
	time.Sleep(5 * time.Second)
	logs := left.String()
	if n := strings.Count(logs, leftMsg); n != 1 {
		t.Errorf("%q logged %d times, want once:\n%s", leftMsg, n, logs)
	}
	_, after, _ := strings.Cut(logs, leftMsg)
	_, after, _ = strings.Cut(after, "\n") // the lines after that one
	for _, chatter := range []string{"heartbeat timeout reached", "election", "candidate"} {
		if strings.Contains(strings.ToLower(after), chatter) {
			t.Errorf("%s logs %q after saying it left:\n%s", name, chatter, after)
		}
	}
	if !strings.Contains(logs, "stop it (to join a cluster again, start it on an empty --data-dir with --join)") {
		t.Errorf("the line does not say what to do:\n%s", logs)
	}
}
