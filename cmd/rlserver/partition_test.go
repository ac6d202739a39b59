package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/slots"
)

// TestContainerPartition runs three nodes in containers of our image and
// cuts the network of the node leading the most groups, twice (five times
// in TestLongContainerPartition, which make test-long runs).
//
// The containers share two networks: the nodes' own (internal: Raft and
// internal calls, each node known by its alias n1, n2, n3, its
// --raft-addr), which the cut takes the node off, and one through which
// their RESP and HTTP ports are published on 127.0.0.1, which stays, so
// the test keeps talking to the isolated node. The nodes announce
// nX:6379 (--listen 0.0.0.0:6379 takes --raft-addr's host); the test's
// client maps those to the published ports.
//
// Each cycle runs a steady load on keys of every group, cuts the node off,
// measures (a) the time until a node of the majority reports every group
// ready on a majority node and (b) the time until the client has an answer
// for keys of every group again (both from the moment docker network
// disconnect is called), heals the network, waits until the node has
// caught up, stops the load and checks what strong mode promises:
//   - the isolated node allows no check later than the lease (250 ms) plus
//     the replies already in flight after the cut (counted from the moment
//     the disconnect returned): it cannot commit, so it answers TRYAGAIN,
//     CLUSTERDOWN or MOVED;
//   - every admission acknowledged, on either side, is counted after the
//     heal; a key may count more only by attempts whose outcome the client
//     could not know (no reply, or TRYAGAIN after the lead moved: the
//     change may have reached the majority before the cut);
//   - every replica of every group, as every node reports it, is at the
//     same applied index with the same state digest.
//
// TestContainerPartitionFast does the same in fast mode, where the
// isolated leader decides in memory until it steps down: it may allow
// checks until its lease (twice --raft-leader-lease-timeout, 500 ms) and
// the pulse's freshness (300 ms) have passed since its last contact, plus
// the replies in flight; what it allowed since its last commit is lost when
// it rejoins, so a key may count less than acknowledged by at most the
// isolated node's allowed replies since the cut (and the flush before it).
func TestContainerPartition(t *testing.T) {
	alone(t)
	testContainerPartition(t, 2, "strong")
}

// TestContainerPartitionFast is TestContainerPartition in fast mode, the
// default: it measures how long a cut-off fast leader still allows
// checks.
func TestContainerPartitionFast(t *testing.T) {
	alone(t)
	testContainerPartition(t, 2, "fast")
}

// TestLongContainerPartition is TestContainerPartition with five cuts:
// make test-long runs it.
func TestLongContainerPartition(t *testing.T) {
	testutil.LongOnly(t)
	testContainerPartition(t, 5, "strong")
}

// testContainerPartition cuts a node off and heals it, cycles times, with
// --consistency mode.
func testContainerPartition(t *testing.T, partCycles int, mode string) {
	testutil.RequireDocker(t)
	env := newPartEnv(t)
	nodes := env.startNodes(3, "--consistency", mode)
	waitPartBalanced(t, nodes[0], 60*time.Second)
	c := newPartClient(t, nodes)
	c.fast = mode == "fast"
	var served, answered []time.Duration
	for cycle := 1; cycle <= partCycles; cycle++ {
		a, b := env.cycle(t, c, cycle)
		served, answered = append(served, a), append(answered, b)
		if cycle < partCycles {
			waitPartBalanced(t, nodes[0], 30*time.Second)
		}
	}
	t.Logf("over %d cuts: (a) every group ready on the majority, median %v (each %v); (b) every group answered, median %v (each %v); %s",
		partCycles, median(served), roundAll(served), median(answered), roundAll(answered), c.tally.summary())
}

const (
	partKeysPerGroup = 4
	partInterval     = 10 * time.Millisecond // between two checks of one group's worker
	partLease        = 250 * time.Millisecond
	// partFastLease is a fast-mode leader's: twice the configured lease,
	// and the pulse's freshness (cluster's timeouts, pulse.Fresh).
	partFastLease = 2*partLease + 300*time.Millisecond
	// partFastLost bounds how long before the disconnect is called an
	// admission of the isolated fast leader may still be lost: the last
	// three flush intervals' (10 ms each; a leader more epochs behind holds
	// its replies), and what the disconnect caught in flight.
	partFastLost = 50 * time.Millisecond
	// partInFlight is how long after the cut a reply the isolated node
	// had already decided (committed before the cut) may still arrive.
	partInFlight = 150 * time.Millisecond
	partHold     = 3 * time.Second // the shortest cut: long enough for CLUSTERDOWN (2s)
	partGoal     = 2 * time.Second
	partBound    = 5 * time.Second
	partLimit    = 1000000
)

// dockerRun runs docker with args and returns its trimmed output.
func dockerRun(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// cleanupDocker runs docker with args when the test ends (removing what
// it made), and logs a failure.
func cleanupDocker(t *testing.T, args ...string) {
	t.Cleanup(func() {
		if _, err := dockerRun(args...); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
}

func mustDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := dockerRun(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// partEnv is the image and networks of one run; everything it creates is
// named after prefix, labelled, and removed when the test ends.
type partEnv struct {
	t       *testing.T
	prefix  string
	image   string
	clients string // network: the published ports
	cluster string // network: Raft and the nodes' internal calls
	nodes   []*partNode
}

// partNode is one container.
type partNode struct {
	name      string // node id and alias on the cluster network: n1
	container string
	resp      string // announced RESP address: n1:6379
	hostRESP  string // published: 127.0.0.1:port
	hostHTTP  string
	clusterIP string // on the cluster network, kept across a cut
	client    *redis.Client
}

func newPartEnv(t *testing.T) *partEnv {
	e := &partEnv{t: t, prefix: fmt.Sprintf("rlpart-%08x", rand.Uint32())}
	e.buildImage()
	e.clients = e.prefix + "-clients"
	mustDocker(t, "network", "create", "--label", "rlserver-test="+e.prefix, e.clients)
	cleanupDocker(t, "network", "rm", e.clients)
	e.cluster = e.prefix + "-cluster"
	e.createClusterNet()
	return e
}

// buildImage points e at our image, built from the Dockerfile around the
// static binary once per test run (testImage).
func (e *partEnv) buildImage() {
	e.image = testImage.get(e.t)
}

// testImage is the image of the containers tests, built at most once per
// test run; TestMain removes it at the end.
var testImage imageBuild

// imageBuild is an image built at most once per test run.
type imageBuild struct {
	once sync.Once
	tag  string
	err  error
}

// do builds the image on the first call (buildTestImage) and returns its
// tag, or why it could not be built.
func (b *imageBuild) do() (string, error) {
	b.once.Do(func() {
		tag := fmt.Sprintf("rlserver-test:run-%08x", rand.Uint32())
		if err := buildTestImage(tag); err != nil {
			b.err = fmt.Errorf("building the test image: %v", err)
			return
		}
		b.tag = tag
	})
	return b.tag, b.err
}

// buildTestImage builds our image as tag, in a build context of its own
// under binDir holding the static binary, the Dockerfile and
// .dockerignore.
func buildTestImage(tag string) error {
	bin, err := staticBuild.do()
	if err != nil {
		return err
	}
	ctxDir, err := os.MkdirTemp(binDir, "image-")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(ctxDir, "bin", "data"), 0o755); err != nil { // the image's empty /data
		return err
	}
	if err := os.Link(bin, filepath.Join(ctxDir, "bin", "rlserver")); err != nil {
		return err
	}
	for _, f := range []string{"Dockerfile", ".dockerignore"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ctxDir, f), data, 0o644); err != nil {
			return err
		}
	}
	_, err = dockerRun("build", "-q", "--label", "rlserver-test=run", "-t", tag, ctxDir)
	return err
}

// get is do for a test: a failed build fails it.
func (b *imageBuild) get(t *testing.T) string {
	t.Helper()
	tag, err := b.do()
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// remove removes the image, if it was built.
func (b *imageBuild) remove() {
	if b.tag != "" {
		dockerRun("rmi", "-f", b.tag)
	}
}

// createClusterNet creates the internal network the nodes talk on, with a
// subnet of its own so that a node reconnected after a cut gets its
// address back (its Raft listener stays bound to it): Docker lets
// `network connect --ip` name an address only on a network created with
// --subnet, so the subnet Docker would pick is read from a probe network.
func (e *partEnv) createClusterNet() {
	var err error
	for try := 0; try < 3; try++ {
		probe := e.cluster + "-probe"
		mustDocker(e.t, "network", "create", "--label", "rlserver-test="+e.prefix, probe)
		subnet, ierr := dockerRun("network", "inspect", "-f", "{{(index .IPAM.Config 0).Subnet}}", probe)
		dockerRun("network", "rm", probe)
		if ierr != nil {
			e.t.Fatal(ierr)
		}
		if _, err = dockerRun("network", "create", "--internal", "--subnet", subnet,
			"--label", "rlserver-test="+e.prefix, e.cluster); err == nil {
			cleanupDocker(e.t, "network", "rm", e.cluster)
			return
		}
	}
	e.t.Fatal(err)
}

// startNodes starts n containers of one cluster: the image's defaults
// (RESP on 0.0.0.0:6379, HTTP on 0.0.0.0:8080, data in /data, here a
// tmpfs), the cluster's settings as RLSERVER_* variables, and extra
// flags as arguments after the image.
func (e *partEnv) startNodes(n int, extra ...string) []*partNode {
	var peers []string
	for i := 1; i <= n; i++ {
		peers = append(peers, fmt.Sprintf("n%d=n%d:7379", i, i))
	}
	e.t.Cleanup(e.removeContainers)
	for i := 1; i <= n; i++ {
		nd := &partNode{name: fmt.Sprint("n", i), container: fmt.Sprintf("%s-n%d", e.prefix, i)}
		nd.resp = nd.name + ":6379"
		e.nodes = append(e.nodes, nd)
		args := []string{"create", "--name", nd.container, "--label", "rlserver-test=" + e.prefix,
			"--network", e.clients, "-p", "127.0.0.1::6379", "-p", "127.0.0.1::8080", "--tmpfs", "/data:uid=65532,gid=65532",
			"-e", "RLSERVER_NODE_ID=" + nd.name, "-e", "RLSERVER_PEERS=" + strings.Join(peers, ","),
			"-e", "RLSERVER_RAFT_ADDR=" + nd.name + ":7379", e.image}
		mustDocker(e.t, append(args, extra...)...)
		mustDocker(e.t, "network", "connect", "--alias", nd.name, e.cluster, nd.container)
		mustDocker(e.t, "start", nd.container)
		nd.hostRESP = e.published(nd.container, "6379/tcp")
		nd.hostHTTP = e.published(nd.container, "8080/tcp")
		nd.clusterIP = mustDocker(e.t, "inspect", "-f",
			fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", e.cluster), nd.container)
		nd.client = redis.NewClient(&redis.Options{Addr: nd.hostRESP, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 2 * time.Second, WriteTimeout: time.Second, PoolSize: 32})
		e.t.Cleanup(func() { nd.client.Close() })
	}
	return e.nodes
}

// published returns the 127.0.0.1 address port is published on.
func (e *partEnv) published(container, port string) string {
	out := mustDocker(e.t, "port", container, port)
	addr, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(addr)
}

// removeContainers removes the containers (with the tail of their logs
// if the test failed).
func (e *partEnv) removeContainers() {
	for _, nd := range e.nodes {
		if e.t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "30", nd.container).CombinedOutput()
			e.t.Logf("%s (%s), last lines:\n%s", nd.name, nd.container, logs)
		}
		if _, err := dockerRun("rm", "-f", "-v", nd.container); err != nil {
			e.t.Logf("cleanup: %v", err)
		}
	}
}

// partReport is GET /cluster of a node, through its published port.
func partReport(nd *partNode, query string) (cluster.Report, error) {
	return report(&proc{http: nd.hostHTTP}, query)
}

// waitPartBalanced waits until nd reports every group with exactly one
// ready replica, its first voter.
func waitPartBalanced(t *testing.T, nd *partNode, d time.Duration) {
	t.Helper()
	var r cluster.Report
	var err error
	if testutil.Poll(d, func() error {
		if r, err = partReport(nd, ""); err == nil && !r.IsBalanced() {
			return errors.New("not balanced")
		}
		return err
	}) != nil {
		t.Fatalf("the leaders did not return to the groups' first voters within %v: %+v %v", d, r, err)
	}
}

// groupRanges returns each group's slot range, as nd reports it.
func groupRanges(t *testing.T, nd *partNode) map[int][2]int {
	resp, err := http.Get("http://" + nd.hostHTTP + "/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Groups []struct {
			ID    int    `json:"id"`
			Slots [2]int `json:"slots"`
		} `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	ranges := map[int][2]int{}
	for _, g := range r.Groups {
		ranges[g.ID] = g.Slots
	}
	return ranges
}

// partOutcome is what one attempt of a command got.
type partOutcome int

const (
	partOK       partOutcome = iota // a reply
	partMoved                       // -MOVED: nothing done
	partElecting                    // -TRYAGAIN while the group elects: nothing done
	partLostLead                    // another -TRYAGAIN: the change may commit or not
	partDown                        // -CLUSTERDOWN: nothing done
	partNoReply                     // connection or timeout: the change may commit or not
	partOther                       // anything else: the test fails
)

var partOutcomeNames = [...]string{"reply", "MOVED", "TRYAGAIN(electing)", "TRYAGAIN(lost lead)", "CLUSTERDOWN", "no reply", "other error"}

func (o partOutcome) String() string { return partOutcomeNames[o] }

// classifyPart sorts err; for MOVED it also returns the address.
func classifyPart(err error) (partOutcome, string) {
	var rerr redis.Error
	switch {
	case err == nil:
		return partOK, ""
	case !errors.As(err, &rerr):
		return partNoReply, ""
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "MOVED "):
		f := strings.Fields(msg)
		return partMoved, f[len(f)-1]
	case strings.HasPrefix(msg, "TRYAGAIN the slot's group is electing a leader"):
		return partElecting, ""
	case strings.HasPrefix(msg, "TRYAGAIN"):
		return partLostLead, ""
	case strings.HasPrefix(msg, "CLUSTERDOWN"):
		return partDown, ""
	}
	return partOther, msg
}

// partCut is what the tally watches during one cut.
type partCut struct {
	victim     string    // announced address of the isolated node
	start, end time.Time // docker network disconnect called, returned
	heal       time.Time // docker network connect called (zero before)
	firstOK    map[int]time.Time
	fromVictim map[partOutcome]int
	lastAllow  time.Time // the last allowed reply from the isolated node after start
}

// partTally counts what the clients were told. Safe for concurrent use.
type partTally struct {
	mu        sync.Mutex
	acked     map[string]map[int64]int64 // key → window (its end, in hours since the epoch) → allowed replies
	ambiguous map[string]int64           // key → attempts whose change may or may not have been made
	outcomes  map[partOutcome]int64
	lastOther string
	cut       *partCut
	// allowedAt is, by node address and key, when each allowed reply
	// came; cuts is every cut so far (fast mode: mayLose).
	allowedAt map[string][]time.Time
	cuts      []*partCut
}

// mayLose returns how many allowed replies of key a fast-mode cluster
// may have forgotten over the cuts so far: those the isolated node gave
// from partFastLost before its cut until its heal. ta.mu is held.
func (ta *partTally) mayLose(key string) int64 {
	var n int64
	for _, cut := range ta.cuts {
		for _, at := range ta.allowedAt[cut.victim+" "+key] {
			if !at.Before(cut.start.Add(-partFastLost)) && (cut.heal.IsZero() || at.Before(cut.heal)) {
				n++
			}
		}
	}
	return n
}

// record counts one attempt of RL.CHECK key sent to addr (group g).
func (ta *partTally) record(addr string, g int, key string, sent, recv time.Time, o partOutcome, v []any, other string) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.outcomes[o]++
	allowed := o == partOK && len(v) == 5 && v[0] == int64(1)
	if allowed {
		ta.allowedAt[addr+" "+key] = append(ta.allowedAt[addr+" "+key], recv)
	}
	switch {
	case allowed:
		if ta.acked[key] == nil {
			ta.acked[key] = map[int64]int64{}
		}
		ta.acked[key][windowOf(recv, v[4].(int64))]++
	case o == partLostLead || o == partNoReply:
		ta.ambiguous[key]++
	case o == partOther:
		ta.lastOther = other
	}
	cut := ta.cut
	if cut == nil || recv.Before(cut.start) {
		return
	}
	if addr == cut.victim && (cut.heal.IsZero() || recv.Before(cut.heal)) {
		cut.fromVictim[o]++
		if allowed {
			cut.lastAllow = recv
		}
	}
	if addr != cut.victim && o == partOK && !sent.Before(cut.start) {
		if _, ok := cut.firstOK[g]; !ok {
			cut.firstOK[g] = recv
		}
	}
}

// windowOf returns the fixed 1h window a reply received at recv with
// reset_after_ms reset belongs to, as its end in hours since the epoch.
func windowOf(recv time.Time, reset int64) int64 {
	if reset <= 0 {
		return recv.UnixMilli()/time.Hour.Milliseconds() + 1
	}
	return (recv.UnixMilli() + reset + time.Hour.Milliseconds()/2) / time.Hour.Milliseconds()
}

// unexpected counts an answer the test fails on.
func (ta *partTally) unexpected(msg string) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.outcomes[partOther]++
	ta.lastOther = msg
}

func (ta *partTally) summary() string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	var allowed int64
	for _, w := range ta.acked {
		for _, n := range w {
			allowed += n
		}
	}
	return fmt.Sprintf("%d admissions acknowledged; outcomes of all attempts %v", allowed, ta.outcomes)
}

// partClient routes RL.CHECK by group as a cluster client would: it
// follows MOVED, and after TRYAGAIN, CLUSTERDOWN or no reply tries the
// next node, since the node it asked may be cut off.
type partClient struct {
	nodes   []*partNode
	byAddr  map[string]*partNode
	ranges  map[int][2]int
	keys    map[int][]string // group → its keys
	tally   *partTally
	fast    bool // the nodes run in fast mode
	mu      sync.Mutex
	routeOf map[int]string // group → announced address
}

func newPartClient(t *testing.T, nodes []*partNode) *partClient {
	c := &partClient{nodes: nodes, byAddr: map[string]*partNode{}, ranges: groupRanges(t, nodes[0]),
		keys: map[int][]string{}, routeOf: map[int]string{},
		tally: &partTally{acked: map[string]map[int64]int64{}, ambiguous: map[string]int64{}, outcomes: map[partOutcome]int64{},
			allowedAt: map[string][]time.Time{}}}
	for _, nd := range nodes {
		c.byAddr[nd.resp] = nd
	}
	for i, full := 0, 0; full < len(c.ranges); i++ {
		key := fmt.Sprint("part:", i)
		if g := c.groupOf(key); len(c.keys[g]) < partKeysPerGroup {
			c.keys[g] = append(c.keys[g], key)
			if len(c.keys[g]) == partKeysPerGroup {
				full++
			}
		}
	}
	return c
}

func (c *partClient) groupOf(key string) int {
	s := slots.Of([]byte(key))
	for g, r := range c.ranges {
		if s >= r[0] && s <= r[1] {
			return g
		}
	}
	panic("no group serves slot " + strconv.Itoa(s))
}

func (c *partClient) route(g int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.routeOf[g]; ok {
		return a
	}
	return c.nodes[0].resp
}

func (c *partClient) setRoute(g int, addr string) {
	c.mu.Lock()
	c.routeOf[g] = addr
	c.mu.Unlock()
}

// next returns the node after addr.
func (c *partClient) next(addr string) string {
	for i, nd := range c.nodes {
		if nd.resp == addr {
			return c.nodes[(i+1)%len(c.nodes)].resp
		}
	}
	return c.nodes[0].resp
}

// once sends one RL.CHECK of key to addr and tallies it.
func (c *partClient) once(addr, key string) (partOutcome, string) {
	g := c.groupOf(key)
	sent := time.Now()
	v, err := c.byAddr[addr].client.Do(context.Background(), "RL.CHECK", key, "fixed", partLimit, "1h").Slice()
	o, to := classifyPart(err)
	c.tally.record(addr, g, key, sent, time.Now(), o, v, to)
	return o, to
}

// check sends RL.CHECK key until a node answers it (or stop is closed).
func (c *partClient) check(stop <-chan struct{}, key string) {
	g := c.groupOf(key)
	addr := c.route(g)
	for {
		o, to := c.once(addr, key)
		switch {
		case o == partOK:
			c.setRoute(g, addr)
			return
		case o == partMoved && c.byAddr[to] != nil:
			addr = to
			c.setRoute(g, addr)
			continue
		case o == partMoved:
			c.tally.unexpected("MOVED to an unknown node: " + to)
			return
		case o == partOther:
			return // counted: the test fails
		}
		addr = c.next(addr)
		select {
		case <-stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// peek returns RL.PEEK's reply for key, following MOVED and retrying.
func (c *partClient) peek(t *testing.T, key string) []any {
	g := c.groupOf(key)
	addr := c.route(g)
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := c.byAddr[addr].client.Do(context.Background(), "RL.PEEK", key, "fixed", partLimit, "1h").Slice()
		o, to := classifyPart(err)
		switch {
		case o == partOK:
			return v
		case o == partMoved && c.byAddr[to] != nil:
			addr = to
			continue
		case time.Now().After(deadline) || o == partOther || o == partMoved:
			t.Fatalf("RL.PEEK %s on %s: %v", key, addr, err)
		}
		addr = c.next(addr)
		time.Sleep(10 * time.Millisecond)
	}
}

// load checks the keys of every group at a steady rate, one worker per
// group (a group that fails over does not hold up the others), until the
// returned function is called.
func (c *partClient) load() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, keys := range c.keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(partInterval)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				c.check(done, keys[i%len(keys)])
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// probe sends checks of keys straight to addr, whatever it answers, until
// the returned function is called.
func (c *partClient) probe(addr string, keys []string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			c.once(addr, keys[i%len(keys)])
		}
	}()
	return func() { close(done); wg.Wait() }
}

// cycle cuts the node leading the most groups off the cluster network
// under load, measures the failover, heals, and checks the counts and the
// replicas. It returns (a) and (b) of this cut.
func (e *partEnv) cycle(t *testing.T, c *partClient, n int) (served, answered time.Duration) {
	stopLoad := sync.OnceFunc(c.load())
	defer stopLoad()
	time.Sleep(500 * time.Millisecond)
	victim, led := e.mostLeading(t)
	majority := e.nodes[0]
	if majority == victim {
		majority = e.nodes[1]
	}
	var probeKeys []string
	for _, g := range led {
		probeKeys = append(probeKeys, c.keys[g]...)
	}
	stopProbe := sync.OnceFunc(c.probe(victim.resp, probeKeys))
	defer stopProbe()
	time.Sleep(100 * time.Millisecond)

	cut := &partCut{victim: victim.resp, start: time.Now(), firstOK: map[int]time.Time{}, fromVictim: map[partOutcome]int{}}
	c.tally.mu.Lock()
	c.tally.cut = cut
	c.tally.cuts = append(c.tally.cuts, cut)
	c.tally.mu.Unlock()
	mustDocker(t, "network", "disconnect", e.cluster, victim.container)
	end := time.Now()
	c.tally.mu.Lock()
	cut.end = end
	c.tally.mu.Unlock()

	servedAt := waitServedOnMajority(t, majority, victim.resp, cut.start)
	answeredAt := c.waitAnswered(t, cut)
	time.Sleep(time.Until(end.Add(partHold)))
	stopProbe()

	c.tally.mu.Lock()
	cut.heal = time.Now()
	c.tally.mu.Unlock()
	mustDocker(t, "network", "connect", "--alias", victim.name, "--ip", victim.clusterIP, e.cluster, victim.container)
	targets := appliedNow(t, majority) // at least what the majority had applied when the network healed
	rejoined := waitCaughtUp(t, majority, victim.name, targets, cut.heal)
	stopLoad()

	served, answered = servedAt.Sub(cut.start), answeredAt.Sub(cut.start)
	c.tally.mu.Lock()
	c.tally.cut = nil
	c.tally.mu.Unlock()
	cut.judge(t, n, victim.name, len(led), served, answered, rejoined, c.fast)
	c.checkCounts(t, n)
	checkReplicas(t, e.nodes, n)
	return served, answered
}

// judge logs cut n of node victim (which led led groups) and checks the
// time to full service and the isolated node's last allowed reply.
func (cut *partCut) judge(t *testing.T, n int, victim string, led int, served, answered time.Duration, rejoined time.Time, fast bool) {
	t.Helper()
	lastAllowed := "none after the cut began"
	if d := cut.lastAllow.Sub(cut.end).Round(time.Millisecond); d > 0 {
		lastAllowed = fmt.Sprintf("the last %v after the disconnect returned", d)
	} else if !cut.lastAllow.IsZero() {
		lastAllowed = fmt.Sprintf("the last %v before the disconnect returned", -d)
	}
	t.Logf("cut %d: %s (led %d groups) cut off (docker network disconnect took %v); (a) every group ready on the majority after %v, "+
		"(b) every group answered after %v; the isolated node answered %v, allowed: %s; healed after %v, caught up %v later",
		n, victim, led, cut.end.Sub(cut.start).Round(time.Millisecond), served.Round(time.Millisecond),
		answered.Round(time.Millisecond), cut.fromVictim, lastAllowed, cut.heal.Sub(cut.start).Round(time.Millisecond),
		rejoined.Sub(cut.heal).Round(time.Millisecond))
	if answered > partBound {
		t.Errorf("cut %d: full service took %v (goal %v, bound %v)", n, answered, partGoal, partBound)
	}
	lease := partLease
	if fast {
		lease = partFastLease
	}
	if bound := cut.end.Add(lease + partInFlight); cut.lastAllow.After(bound) {
		t.Errorf("cut %d: the isolated node allowed a check %v after the disconnect returned, later than the lease (%v) "+
			"and the replies in flight (%v)", n, cut.lastAllow.Sub(cut.end), lease, partInFlight)
	}
}

// mostLeading returns the node leading the most groups and those groups.
func (e *partEnv) mostLeading(t *testing.T) (*partNode, []int) {
	r, err := partReport(e.nodes[0], "")
	if err != nil {
		t.Fatal(err)
	}
	best, most := e.nodes[0], -1
	for _, nd := range e.nodes {
		for _, rn := range r.Nodes {
			if rn.Name == nd.name && rn.Leads > most {
				best, most = nd, rn.Leads
			}
		}
	}
	var led []int
	for _, g := range r.Groups {
		for _, rep := range g.Replicas {
			if rep.Ready && rep.Node == best.name {
				led = append(led, g.ID)
			}
		}
	}
	return best, led
}

// waitServedOnMajority returns when the first report of nd that shows
// every group served by a node other than victim was asked for. While the
// victim is cut off a report takes its 2 s internal timeout, so reports
// are asked for every 10 ms, side by side.
func waitServedOnMajority(t *testing.T, nd *partNode, victim string, start time.Time) time.Time {
	t.Helper()
	type result struct {
		asked time.Time
		ok    bool
	}
	results := make(chan result, 4096)
	var wg sync.WaitGroup
	var first time.Time
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := start.Add(15 * time.Second)
	for first.IsZero() && time.Now().Before(deadline) {
		select {
		case r := <-results:
			if r.ok {
				first = r.asked
			}
		case <-tick.C:
			wg.Add(1)
			go func() {
				defer wg.Done()
				asked := time.Now()
				r, err := partReport(nd, "")
				results <- result{asked, err == nil && r.ServedWithout(nodeAt(r, victim))}
			}()
		}
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.ok && (first.IsZero() || r.asked.Before(first)) {
			first = r.asked
		}
	}
	if first.IsZero() {
		t.Fatalf("15 s after the cut, %s does not report every group served without %s", nd.name, victim)
	}
	return first
}

// waitAnswered returns when every group has answered a check sent after
// the cut from a node of the majority.
func (c *partClient) waitAnswered(t *testing.T, cut *partCut) time.Time {
	t.Helper()
	var last time.Time
	if err := testutil.Poll(time.Until(cut.start.Add(15*time.Second)), func() error {
		c.tally.mu.Lock()
		defer c.tally.mu.Unlock()
		last = time.Time{}
		for _, at := range cut.firstOK {
			if at.After(last) {
				last = at
			}
		}
		if n := len(cut.firstOK); n != len(c.keys) {
			return fmt.Errorf("only %d of %d groups have answered", n, len(c.keys))
		}
		return nil
	}); err != nil {
		t.Fatalf("15 s after the cut, %v", err)
	}
	return last
}

// appliedNow returns each group's highest applied index, as nd reports.
func appliedNow(t *testing.T, nd *partNode) map[int]uint64 {
	r, err := partReport(nd, "")
	if err != nil {
		t.Fatal(err)
	}
	applied := map[int]uint64{}
	for _, g := range r.Groups {
		for _, rep := range g.Replicas {
			applied[g.ID] = max(applied[g.ID], rep.Applied)
		}
	}
	return applied
}

// waitCaughtUp returns when nd reports node's replica of every group
// applied up to targets.
func waitCaughtUp(t *testing.T, nd *partNode, node string, targets map[int]uint64, healed time.Time) time.Time {
	t.Helper()
	for {
		r, err := partReport(nd, "")
		if err == nil && len(r.Groups) == len(targets) && caughtUp(r, node, targets) {
			return time.Now()
		}
		if time.Since(healed) > 60*time.Second {
			t.Fatalf("%s has not caught up 60 s after the network healed: %+v %v", node, r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func caughtUp(r cluster.Report, node string, targets map[int]uint64) bool {
	for _, g := range r.Groups {
		ok := false
		for _, rep := range g.Replicas {
			ok = ok || rep.Node == node && rep.Applied >= targets[g.ID]
		}
		if !ok {
			return false
		}
	}
	return true
}

// checkCounts reads every key through the cluster and compares it with
// the admissions acknowledged (in the key's current window): not one may
// be missing, and a key may count more only by attempts whose outcome the
// client could not know (no reply, or TRYAGAIN after the lead moved).
func (c *partClient) checkCounts(t *testing.T, n int) {
	t.Helper()
	c.tally.mu.Lock()
	defer c.tally.mu.Unlock()
	if c.tally.outcomes[partOther] > 0 {
		t.Fatalf("cut %d: %d unexpected errors, the last: %s", n, c.tally.outcomes[partOther], c.tally.lastOther)
	}
	var keys, exact, acked, extra, wrong int64
	for _, ks := range c.keys {
		for _, key := range ks {
			v := c.peek(t, key)
			now := time.Now()
			used := partLimit - v[2].(int64)
			want := c.tally.acked[key][windowOf(now, v[4].(int64))]
			var lost int64 // fast mode: the isolated leader's admissions it may forget
			if c.fast {
				lost = c.tally.mayLose(key)
			}
			if used < want-lost || used > want+c.tally.ambiguous[key] {
				wrong++
				t.Errorf("cut %d: %s counts %d; %d admissions were acknowledged (%d of them by the isolated node around the cut, "+
					"which fast mode may forget), %d attempts had no known outcome", n, key, used, want, lost, c.tally.ambiguous[key])
				for who, ats := range c.tally.allowedAt {
					if strings.HasSuffix(who, " "+key) && len(ats) > 0 {
						t.Logf("  %s: %d allowed, the last at %v", who, len(ats), ats[len(ats)-1].Format("15:04:05.000"))
					}
				}
			}
			keys++
			acked += want
			extra += used - want
			if used == want {
				exact++
			}
		}
	}
	t.Logf("cut %d: %d keys, %d admissions acknowledged, %d keys counted wrong; %d keys exact, %d admissions counted beyond "+
		"those acknowledged (attempts of unknown outcome so far: %d)", n, keys, acked, wrong, exact, extra, sumValues(c.tally.ambiguous))
}

func sumValues(m map[string]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// checkReplicas asks every node for its report with digests at one time
// and requires every replica of every group, in every report, at the
// same applied index and digest (retrying while the indexes still move).
func checkReplicas(t *testing.T, nodes []*partNode, n int) {
	t.Helper()
	if err := testutil.Poll(30*time.Second, func() error {
		at := time.Now().UnixNano()
		seen := map[int]string{} // group → applied/digest
		for _, nd := range nodes {
			r, err := partReport(nd, fmt.Sprintf("?digest_at=%d", at))
			if err != nil {
				return err
			}
			if why := sameReplicas(r, len(nodes), seen); why != "" {
				return errors.New(nd.name + ": " + why)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("cut %d: the replicas differ 30 s after the load stopped: %v", n, err)
	}
}

// sameReplicas returns why r's replicas differ from each other or from
// seen (filled from the first report), or "".
func sameReplicas(r cluster.Report, want int, seen map[int]string) string {
	if len(r.Groups) == 0 {
		return "no groups"
	}
	for _, g := range r.Groups {
		if len(g.Replicas) != want {
			return fmt.Sprintf("group %d has %d replicas reporting", g.ID, len(g.Replicas))
		}
		for _, rep := range g.Replicas {
			state := fmt.Sprintf("applied %d digest %s", rep.Applied, rep.Digest)
			if rep.Digest == "" {
				return fmt.Sprintf("group %d: %s reports no digest", g.ID, rep.Node)
			}
			if s, ok := seen[g.ID]; ok && s != state {
				return fmt.Sprintf("group %d: %s has %s, another replica %s", g.ID, rep.Node, state, s)
			}
			seen[g.ID] = state
		}
	}
	return ""
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2].Round(time.Millisecond)
	}
	return ((s[len(s)/2-1] + s[len(s)/2]) / 2).Round(time.Millisecond)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
