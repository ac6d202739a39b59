package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/slots"
)

// fakeCluster is a Cluster for the tests: a shards.Store as the Limiter,
// with a topology and routing the test sets.
type fakeCluster struct {
	*shards.Store
	mu    sync.Mutex
	view  ClusterView
	keys  map[int]int          // KeysInSlot's answers
	route func(slot int) error // nil: every slot is served here
}

func newFakeCluster(v ClusterView) *fakeCluster {
	return &fakeCluster{Store: shards.New(16), view: v}
}

func (f *fakeCluster) ClusterView() ClusterView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view
}

func (f *fakeCluster) KeysInSlot(slot int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[slot]
}

func (f *fakeCluster) Route(slot int) error {
	f.mu.Lock()
	route := f.route
	f.mu.Unlock()
	if route == nil {
		return nil
	}
	return route(slot)
}

// Await waits a millisecond: the fake's picture changes when a test says.
func (f *fakeCluster) Await(deadline time.Time) bool {
	time.Sleep(time.Millisecond)
	return time.Now().Before(deadline)
}

func (f *fakeCluster) setView(v ClusterView) {
	f.mu.Lock()
	f.view = v
	f.mu.Unlock()
}

func (f *fakeCluster) setRoute(route func(slot int) error) {
	f.mu.Lock()
	f.route = route
	f.mu.Unlock()
}

// nodeID returns a 40-hex-character node ID made of c and zeros.
func nodeID(c byte) string { return strings.Repeat(string(c)+"0", 20) }

// soloView is the view of a one-node cluster whose node, at addr, leads
// the one group that owns every slot.
func soloView(t testing.TB, addr string) ClusterView {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	id := nodeID('e')
	return ClusterView{MyID: id, OK: true, Nodes: []ClusterNode{
		{ID: id, Name: "n1", Host: host, Port: port, BusPort: port + 10000, Connected: true, Myself: true},
	}, Ranges: []SlotRange{{Start: 0, End: slots.Count - 1, Master: id}}}
}

// startSolo starts a server whose fake cluster claims every slot.
func startSolo(t testing.TB) (*fakeCluster, string) {
	t.Helper()
	f := newFakeCluster(ClusterView{})
	_, addr := startServer(t, Config{Limiter: f, Clock: fakeClock()})
	f.setView(soloView(t, addr))
	return f, addr
}

var idA, idB, idC = nodeID('a'), nodeID('b'), nodeID('c')

// threeNodes is a view from node A of three nodes and five groups: B is
// reachable, C is not; group 0 owns two ranges; group 2's single slot
// continues A's range of group 0; group 4 has no leader.
func threeNodes() ClusterView {
	return ClusterView{MyID: idA, OK: false, Epoch: 7,
		Nodes: []ClusterNode{
			{ID: idA, Name: "a", Host: "127.0.0.1", Port: 7001, BusPort: 17001, Connected: true, Myself: true},
			{ID: idB, Name: "b", Host: "127.0.0.2", Port: 7002, BusPort: 17002, Connected: true},
			{ID: idC, Name: "c", Host: "127.0.0.3", Port: 7003, BusPort: 17003},
		},
		Ranges: []SlotRange{
			{Start: 0, End: 5000, Group: 0, Master: idA, Replicas: []string{idB, idC}},
			{Start: 5001, End: 10000, Group: 1, Master: idB, Replicas: []string{idA, idC}},
			{Start: 10001, End: 12000, Group: 0, Master: idA, Replicas: []string{idB, idC}},
			{Start: 12001, End: 12001, Group: 2, Master: idA, Replicas: []string{idB}},
			{Start: 12002, End: 13000, Group: 3, Master: idC, Replicas: []string{idA}},
			{Start: 13001, End: 16383, Group: 4, Replicas: []string{idA, idB, idC}},
		}}
}

// verbatim is a verbatim string of format txt, for encode.
type verbatim string

// encode returns the RESP encoding of v for protocol proto: int, string
// (bulk), status, verbatim, error (an error reply), []any, kv (a map).
func encode(proto int, v any) string {
	switch v := v.(type) {
	case int:
		return ":" + strconv.Itoa(v) + "\r\n"
	case string:
		return "$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n"
	case status:
		return "+" + string(v) + "\r\n"
	case error:
		return "-" + v.Error() + "\r\n"
	case verbatim:
		if proto == 3 {
			return "=" + strconv.Itoa(len(v)+4) + "\r\ntxt:" + string(v) + "\r\n"
		}
		return encode(proto, string(v))
	case []any:
		s := "*" + strconv.Itoa(len(v)) + "\r\n"
		for _, e := range v {
			s += encode(proto, e)
		}
		return s
	case kv:
		s := "*" + strconv.Itoa(len(v)) + "\r\n"
		if proto == 3 {
			s = "%" + strconv.Itoa(len(v)/2) + "\r\n"
		}
		for _, e := range v {
			s += encode(proto, e)
		}
		return s
	}
	panic(fmt.Sprintf("encode: %T", v))
}

func slotsEntry(n ClusterNode) []any { return []any{n.Host, n.Port, n.ID, kv{}} }

func shardEntry(n ClusterNode, role, health string) kv {
	return kv{"id", n.ID, "port", n.Port, "ip", n.Host, "endpoint", n.Host, "role", role,
		"replication-offset", 0, "health", health}
}

// hello3 switches c to RESP3 and skips HELLO's reply.
func hello3(t testing.TB, c *rawConn) {
	t.Helper()
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c.nc, resp("HELLO", "3"))
	readRV(t, c.rd)
}

func TestClusterCommands(t *testing.T) {
	v := threeNodes()
	a, b, c := v.Nodes[0], v.Nodes[1], v.Nodes[2]
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			f := newFakeCluster(v)
			f.keys = map[int]int{7: 3}
			_, addr := startServer(t, Config{Limiter: f, Clock: fakeClock()})
			conn := dialRaw(t, addr)
			if proto == 3 {
				hello3(t, conn)
			}
			nodes := idA + " 127.0.0.1:7001@17001 myself,master - 0 0 7 connected 0-5000 10001-12001\n" +
				idB + " 127.0.0.2:7002@17002 master - 0 0 7 connected 5001-10000\n" +
				idC + " 127.0.0.3:7003@17003 master,fail - 0 0 7 disconnected 12002-13000\n"
			info := "cluster_state:fail\r\ncluster_slots_assigned:13001\r\ncluster_slots_ok:12002\r\n" +
				"cluster_slots_pfail:999\r\ncluster_slots_fail:0\r\ncluster_known_nodes:3\r\ncluster_size:3\r\n" +
				"cluster_current_epoch:7\r\ncluster_my_epoch:7\r\ncluster_stats_messages_sent:0\r\n" +
				"cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"
			shardsReply := []any{
				kv{"slots", []any{0, 5000, 10001, 12000}, "nodes", []any{
					shardEntry(a, "master", "online"), shardEntry(b, "replica", "online"), shardEntry(c, "replica", "fail")}},
				kv{"slots", []any{5001, 10000}, "nodes", []any{
					shardEntry(b, "master", "online"), shardEntry(a, "replica", "online"), shardEntry(c, "replica", "fail")}},
				kv{"slots", []any{12001, 12001}, "nodes", []any{
					shardEntry(a, "master", "online"), shardEntry(b, "replica", "online")}},
				kv{"slots", []any{12002, 13000}, "nodes", []any{
					shardEntry(c, "master", "fail"), shardEntry(a, "replica", "online")}},
				kv{"slots", []any{13001, 16383}, "nodes", []any{
					shardEntry(a, "replica", "online"), shardEntry(b, "replica", "online"), shardEntry(c, "replica", "fail")}},
			}
			for _, st := range []struct {
				req  string
				want any
			}{
				// Ranges without a leader are left out; unreachable replicas too.
				{resp("CLUSTER", "SLOTS"), []any{
					[]any{0, 5000, slotsEntry(a), slotsEntry(b)},
					[]any{5001, 10000, slotsEntry(b), slotsEntry(a)},
					[]any{10001, 12000, slotsEntry(a), slotsEntry(b)},
					[]any{12001, 12001, slotsEntry(a), slotsEntry(b)},
					[]any{12002, 13000, slotsEntry(c), slotsEntry(a)},
				}},
				{resp("cluster", "shards"), shardsReply},
				{resp("CLUSTER", "NODES"), verbatim(nodes)},
				{resp("CLUSTER", "INFO"), verbatim(info)},
				{resp("CLUSTER", "MYID"), idA},
				{resp("CLUSTER", "KEYSLOT", "foo"), 12182},
				{resp("CLUSTER", "KEYSLOT", "{user1000}.following"), 3443},
				{resp("CLUSTER", "KEYSLOT", ""), 0},
				{resp("CLUSTER", "COUNTKEYSINSLOT", "7"), 3},
				{resp("CLUSTER", "COUNTKEYSINSLOT", "16383"), 0},
				{resp("CLUSTER", "COUNTKEYSINSLOT", "x"), errors.New("ERR value is not an integer or out of range")},
				{resp("CLUSTER", "COUNTKEYSINSLOT", "07"), errors.New("ERR value is not an integer or out of range")},
				{resp("CLUSTER", "COUNTKEYSINSLOT", "-1"), errors.New("ERR Invalid slot")},
				{resp("CLUSTER", "COUNTKEYSINSLOT", "16384"), errors.New("ERR Invalid slot")},
				{resp("CLUSTER", "COUNTKEYSINSLOT"), errors.New("ERR wrong number of arguments for 'cluster|countkeysinslot' command")},
				{resp("CLUSTER", "KEYSLOT", "a", "b"), errors.New("ERR wrong number of arguments for 'cluster|keyslot' command")},
				{resp("CLUSTER", "SLOTS", "x"), errors.New("ERR wrong number of arguments for 'cluster|slots' command")},
				{resp("CLUSTER"), errors.New("ERR wrong number of arguments for 'cluster' command")},
				{resp("CLUSTER", "Foo", "bar"), errors.New("ERR unknown subcommand 'Foo'. Try CLUSTER HELP.")},
				{resp("CLUSTER", "ADDSLOTS"), errors.New("ERR wrong number of arguments for 'cluster|addslots' command")},
				{resp("CLUSTER", "meet", "10.0.0.1", "7000"), errors.New("ERR CLUSTER MEET is not supported: " +
					"rlserver's Raft groups own the slots and elect their leaders themselves; add a node with --join")},
				{resp("READONLY"), status("OK")},
				{resp("READWRITE"), status("OK")},
				{resp("READONLY", "x"), errors.New("ERR wrong number of arguments for 'readonly' command")},
				{resp("INFO", "cluster"), verbatim("# Cluster\r\ncluster_enabled:1\r\n")},
				{resp("CONFIG", "GET", "cluster-enabled"), kv{"cluster-enabled", "yes"}},
			} {
				conn.roundTrip(st.req, encode(proto, st.want))
			}
			// HELP: Redis's header and footer around one entry per subcommand.
			conn.nc.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(conn.nc, resp("CLUSTER", "HELP"))
			help := readRV(t, conn.rd)
			if help.typ != '*' || len(help.elems) != 19 ||
				help.elems[0].str != "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" ||
				help.elems[17].str != "HELP" {
				t.Fatalf("CLUSTER HELP = %s", help)
			}
		})
	}
}

func TestClusterEmptyView(t *testing.T) {
	// A node that knows no leader yet: no ranges in SLOTS, state fail.
	v := threeNodes()
	for i := range v.Ranges {
		v.Ranges[i].Master = ""
	}
	f := newFakeCluster(v)
	_, addr := startServer(t, Config{Limiter: f})
	c := dialRaw(t, addr)
	c.roundTrip(resp("CLUSTER", "SLOTS"), "*0\r\n")
	c.roundTrip(resp("CLUSTER", "NODES"), encode(2, idA+" 127.0.0.1:7001@17001 myself,master - 0 0 7 connected\n"+
		idB+" 127.0.0.2:7002@17002 master - 0 0 7 connected\n"+
		idC+" 127.0.0.3:7003@17003 master,fail - 0 0 7 disconnected\n"))
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c.nc, resp("CLUSTER", "INFO"))
	info := readRV(t, c.rd).str
	if !strings.HasPrefix(info, "cluster_state:fail\r\ncluster_slots_assigned:0\r\ncluster_slots_ok:0\r\n") ||
		!strings.Contains(info, "\r\ncluster_size:0\r\n") {
		t.Fatalf("CLUSTER INFO = %q", info)
	}
}

func TestClusterSoloLiteral(t *testing.T) {
	// One exact RESP2 reply written out by hand, to anchor encode.
	f, addr := startSolo(t)
	_, port, _ := net.SplitHostPort(addr)
	id := f.ClusterView().MyID
	dialRaw(t, addr).roundTrip(resp("CLUSTER", "SLOTS"),
		"*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:"+port+"\r\n$40\r\n"+id+"\r\n*0\r\n")
}

func TestClusterRouting(t *testing.T) {
	moved, tryAgain, down := slots.Of([]byte("{m}")), slots.Of([]byte("{t}")), slots.Of([]byte("{d}"))
	movedErr := "MOVED " + strconv.Itoa(moved) + " 127.0.0.2:7002"
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			f, addr := startSolo(t)
			f.setRoute(func(slot int) error {
				switch slot {
				case moved:
					return errors.New(movedErr)
				case tryAgain:
					return errors.New("TRYAGAIN the group of this slot is electing its leader")
				case down:
					return errors.New("CLUSTERDOWN The cluster is down")
				}
				return nil
			})
			c := dialRaw(t, addr)
			if proto == 3 {
				hello3(t, c)
			}
			for _, st := range []step{
				{resp("RL.CHECK", "{m}k", "fixed", "1", "1m"), "-" + movedErr + "\r\n"},
				{resp("RL.PEEK", "{m}k", "fixed", "1", "1m"), "-" + movedErr + "\r\n"},
				{resp("RL.RESET", "{m}k"), "-" + movedErr + "\r\n"},
				{resp("CL.THROTTLE", "{m}k", "1", "1", "1"), "-" + movedErr + "\r\n"},
				// Routing comes before the arguments are parsed, after arity.
				{resp("RL.CHECK", "{m}k", "bogus", "1", "1m"), "-" + movedErr + "\r\n"},
				{resp("RL.RESET", "{m}k", "x"), "-ERR wrong number of arguments for 'rl.reset' command; usage: RL.RESET key\r\n"},
				{resp("RL.CHECK", "{t}k", "fixed", "1", "1m"), "-TRYAGAIN the group of this slot is electing its leader\r\n"},
				{resp("RL.CHECK", "{d}k", "fixed", "1", "1m"), "-CLUSTERDOWN The cluster is down\r\n"},
				{resp("RL.CHECK", "k", "fixed", "1", "1m"), ints(1, 1, 0, 0, 60000)},
				{resp("CLUSTER", "KEYSLOT", "{m}k"), ":" + strconv.Itoa(moved) + "\r\n"},
				{resp("PING"), "+PONG\r\n"},
				// MULTI: a queued key of a slot not served here dirties the
				// transaction, as in Redis Cluster.
				{resp("MULTI"), "+OK\r\n"},
				{resp("RL.CHECK", "{m}k", "fixed", "1", "1m"), "-" + movedErr + "\r\n"},
				{resp("RL.CHECK", "k", "fixed", "1", "1m"), "+QUEUED\r\n"},
				{resp("EXEC"), "-EXECABORT Transaction discarded because of previous errors.\r\n"},
				{resp("RL.PEEK", "k", "fixed", "1", "1m"), ints(1, 1, 0, 0, 60000)},
			} {
				c.roundTrip(st.req, st.want)
			}
			if n := f.Len(); n != 1 {
				t.Fatalf("%d keys, want 1: a refused key was stored", n)
			}
			// A slot that moves between queueing and EXEC: EXEC answers the
			// redirection and runs nothing.
			c.roundTrip(resp("MULTI"), "+OK\r\n")
			c.roundTrip(resp("RL.CHECK", "{x}k", "fixed", "1", "1m"), "+QUEUED\r\n")
			f.setRoute(func(int) error { return errors.New("MOVED 1 127.0.0.2:7002") })
			c.roundTrip(resp("EXEC"), "-MOVED 1 127.0.0.2:7002\r\n")
			c.roundTrip(resp("EXEC"), "-ERR EXEC without MULTI\r\n")
			f.setRoute(nil)
			c.roundTrip(resp("RL.PEEK", "{x}k", "fixed", "1", "1m"), ints(1, 1, 1, 0, 0))
		})
	}
}

func TestClusterMulti(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			_, addr := startSolo(t)
			c := dialRaw(t, addr)
			if proto == 3 {
				hello3(t, c)
			}
			check := func(k string) string { return resp("RL.CHECK", k, "fixed", "2", "1m") }
			for _, st := range []step{
				// One slot through the hash tag: runs.
				{resp("MULTI"), "+OK\r\n"},
				{check("{u}a"), "+QUEUED\r\n"},
				{resp("PING"), "+QUEUED\r\n"}, // keyless: fine
				{check("{u}b"), "+QUEUED\r\n"},
				{resp("EXEC"), "*3\r\n" + ints(1, 2, 1, 0, 60000) + "+PONG\r\n" + ints(1, 2, 1, 0, 60000)},
				// Two slots: each command is queued, EXEC discards them all.
				{resp("MULTI"), "+OK\r\n"},
				{check("a"), "+QUEUED\r\n"},
				{check("b"), "+QUEUED\r\n"},
				{resp("EXEC"), "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
				{resp("RL.PEEK", "a", "fixed", "2", "1m"), ints(1, 2, 2, 0, 0)},
				// CROSSSLOT comes before EXECABORT, as in Redis.
				{resp("MULTI"), "+OK\r\n"},
				{check("a"), "+QUEUED\r\n"},
				{check("b"), "+QUEUED\r\n"},
				{resp("NOSUCH"), "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"},
				{resp("EXEC"), "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
				{resp("MULTI"), "+OK\r\n"},
				{check("a"), "+QUEUED\r\n"},
				{resp("RL.CHECK", "a", "bogus", "2", "1m"), "-ERR unknown algorithm 'bogus': want fixed, sliding, log, token, leaky or gcra\r\n"},
				{resp("EXEC"), "-EXECABORT Transaction discarded because of previous errors.\r\n"},
				// Keyless only.
				{resp("MULTI"), "+OK\r\n"},
				{resp("PING"), "+QUEUED\r\n"},
				{resp("EXEC"), "*1\r\n+PONG\r\n"},
			} {
				c.roundTrip(st.req, st.want)
			}
		})
	}
}

func TestClusterDisabled(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			_, addr := startServer(t, Config{Clock: fakeClock()})
			c := dialRaw(t, addr)
			if proto == 3 {
				hello3(t, c)
			}
			disabled := errors.New("ERR This instance has cluster support disabled")
			for _, st := range []struct {
				req  string
				want any
			}{
				{resp("CLUSTER", "SLOTS"), disabled},
				{resp("CLUSTER", "SHARDS"), disabled},
				{resp("CLUSTER", "NODES"), disabled},
				{resp("CLUSTER", "INFO"), disabled},
				{resp("CLUSTER", "MYID"), disabled},
				{resp("CLUSTER", "KEYSLOT", "foo"), disabled},
				{resp("CLUSTER", "HELP"), disabled},
				{resp("CLUSTER", "COUNTKEYSINSLOT", "x"), disabled},
				{resp("CLUSTER", "MEET", "a", "1"), disabled},
				{resp("CLUSTER", "KEYSLOT"), errors.New("ERR wrong number of arguments for 'cluster|keyslot' command")},
				{resp("CLUSTER", "FOO"), errors.New("ERR unknown subcommand 'FOO'. Try CLUSTER HELP.")},
				{resp("READONLY"), disabled},
				{resp("READWRITE"), disabled},
				{resp("INFO", "cluster"), verbatim("# Cluster\r\ncluster_enabled:0\r\n")},
				{resp("CONFIG", "GET", "cluster-enabled"), kv{"cluster-enabled", "no"}},
				{resp("MULTI"), status("OK")},
				{resp("RL.CHECK", "a", "fixed", "1", "1m"), status("QUEUED")},
				{resp("RL.CHECK", "b", "fixed", "1", "1m"), status("QUEUED")},
				{resp("EXEC"), []any{[]any{1, 1, 0, 0, 60000}, []any{1, 1, 0, 0, 60000}}},
			} {
				c.roundTrip(st.req, encode(proto, st.want))
			}
		})
	}
}

func TestClusterCommandDocs(t *testing.T) {
	_, addr := startSolo(t)
	for _, name := range []string{"cluster", "readonly", "readwrite"} {
		got := exchange(t, addr, resp("COMMAND", "DOCS", name))[0]
		if !strings.Contains(got, "$7\r\nsummary\r\n") || !strings.Contains(got, "$5\r\ngroup\r\n$7\r\ncluster\r\n") {
			t.Errorf("COMMAND DOCS %s = %q", name, got)
		}
	}
}

// rv is a parsed RESP2 or RESP3 reply.
type rv struct {
	typ   byte   // RESP's type byte; '_' for every null
	str   string // the payload of simple, error, number, bulk and verbatim replies
	elems []rv   // of arrays, sets and pushes; a map's keys and values alternate
}

// String prints v with its payloads, for failure messages.
func (v rv) String() string {
	if v.elems == nil && v.typ != '*' && v.typ != '%' && v.typ != '~' {
		return string(v.typ) + strconv.Quote(v.str)
	}
	parts := make([]string, len(v.elems))
	for i, e := range v.elems {
		parts[i] = e.String()
	}
	return string(v.typ) + "[" + strings.Join(parts, " ") + "]"
}

// readRV reads one reply.
func readRV(t testing.TB, rd *bufio.Reader) rv {
	t.Helper()
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	typ, rest := line[0], line[1:]
	switch typ {
	case '+', '-', ':', ',', '#', '(', '_':
		return rv{typ: typ, str: rest}
	case '$', '=', '!':
		n, _ := strconv.Atoi(rest)
		if n < 0 {
			return rv{typ: '_'}
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(rd, body); err != nil {
			t.Fatal(err)
		}
		return rv{typ: typ, str: string(body[:n])}
	case '*', '~', '>', '%', '|':
		n, _ := strconv.Atoi(rest)
		if n < 0 {
			return rv{typ: '_'}
		}
		if typ == '%' || typ == '|' {
			n *= 2
		}
		v := rv{typ: typ, elems: []rv{}}
		for range n {
			v.elems = append(v.elems, readRV(t, rd))
		}
		return v
	}
	t.Fatalf("unknown RESP type in %q", line)
	return rv{}
}

// keyLike matches the bulk strings that shape keeps: map keys and
// enumerated values (role, health), not addresses or IDs.
var keyLike = regexp.MustCompile(`^[a-z][a-z-]*$`)

// shape describes v's types and lengths, its errors in full and its
// key-like strings, so that replies of different nodes can be compared.
func shape(v rv) string {
	switch v.typ {
	case '-':
		return "-" + v.str
	case '$', '+':
		if keyLike.MatchString(v.str) {
			return string(v.typ) + v.str
		}
		return string(v.typ)
	case '*', '~', '%', '>':
		parts := make([]string, len(v.elems))
		for i, e := range v.elems {
			parts[i] = shape(e)
		}
		return string(v.typ) + strconv.Itoa(len(v.elems)) + "[" + strings.Join(parts, ",") + "]"
	}
	return string(v.typ)
}

// session sends requests on one connection to addr, in RESP3 after HELLO 3
// when proto is 3, and returns the replies.
func session(t testing.TB, addr string, proto int, reqs ...string) []rv {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(nc)
	if proto == 3 {
		io.WriteString(nc, resp("HELLO", "3"))
		readRV(t, rd)
	}
	var out []rv
	for _, r := range reqs {
		if _, err := io.WriteString(nc, r); err != nil {
			t.Fatal(err)
		}
		out = append(out, readRV(t, rd))
	}
	return out
}

// startRedisCluster starts a redis-server in cluster mode, gives it every
// slot and waits for cluster_state:ok. It is stopped when the test ends.
func startRedisCluster(t *testing.T) string {
	t.Helper()
	addr := redistest.StartCluster(t)
	if got := session(t, addr, 2, resp("CLUSTER", "ADDSLOTSRANGE", "0", "16383"))[0]; got.str != "OK" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %s", got)
	}
	testutil.WaitFor(t, 10*time.Second, "cluster_state:ok from redis-server on "+addr, func() bool {
		return strings.Contains(session(t, addr, 2, resp("CLUSTER", "INFO"))[0].str, "cluster_state:ok")
	})
	return addr
}

// TestClusterLikeRedis compares our CLUSTER replies, with a fake cluster
// whose one node claims every slot, with those of a real Redis 7 in
// cluster mode whose one node has every slot.
func TestClusterLikeRedis(t *testing.T) {
	redisAddr := startRedisCluster(t)
	_, addr := startSolo(t)
	hex40 := regexp.MustCompile(`^[0-9a-f]{40}$`)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			// Same shape: types, lengths, map keys, errors.
			reqs := []string{resp("CLUSTER", "SLOTS"), resp("CLUSTER", "SHARDS"), resp("CLUSTER", "MYID"),
				resp("CLUSTER", "NODES"), resp("CLUSTER", "INFO"), resp("CLUSTER", "HELP")}
			want, got := session(t, redisAddr, proto, reqs...), session(t, addr, proto, reqs...)
			for i := range reqs[:5] {
				if shape(got[i]) != shape(want[i]) {
					t.Errorf("%q\n rlserver %s\n    Redis %s", reqs[i], shape(got[i]), shape(want[i]))
				}
			}
			if !hex40.MatchString(got[2].str) || !hex40.MatchString(want[2].str) {
				t.Errorf("CLUSTER MYID: rlserver %q, Redis %q", got[2].str, want[2].str)
			}
			compareNodes(t, got[3].str, want[3].str)
			compareInfo(t, got[4].str, want[4].str)
			gh, wh := got[5].elems, want[5].elems
			if got[5].typ != want[5].typ || gh[0].String() != wh[0].String() ||
				gh[len(gh)-2].String() != wh[len(wh)-2].String() || gh[len(gh)-1].String() != wh[len(wh)-1].String() {
				t.Errorf("CLUSTER HELP\n rlserver %s\n    Redis %s", got[5], want[5])
			}

			// Same replies.
			reqs = []string{
				resp("CLUSTER", "COUNTKEYSINSLOT", "x"), resp("CLUSTER", "COUNTKEYSINSLOT", "-1"),
				resp("CLUSTER", "COUNTKEYSINSLOT", "16384"), resp("CLUSTER", "COUNTKEYSINSLOT", "1x"),
				resp("CLUSTER", "COUNTKEYSINSLOT", "99999999999999999999"), resp("CLUSTER", "COUNTKEYSINSLOT", "+5"),
				resp("CLUSTER", "COUNTKEYSINSLOT", "5"), resp("CLUSTER", "COUNTKEYSINSLOT"),
				resp("CLUSTER", "COUNTKEYSINSLOT", "5", "6"), resp("CLUSTER", "KEYSLOT"),
				resp("CLUSTER", "INFO", "x"), resp("CLUSTER", "FOO"), resp("cluster", "foo", "bar"), resp("CLUSTER"),
				resp("READONLY"), resp("READWRITE"), resp("READONLY", "x"), resp("INFO", "cluster"),
				resp("CONFIG", "GET", "cluster-enabled"),
			}
			for _, k := range []string{"", "foo", "{user1000}.following", "{}", "{", "}{", "{a}{b}", "a{}b{c}",
				"api:user:42", "\xff\x00{\x80}"} {
				reqs = append(reqs, resp("CLUSTER", "KEYSLOT", k))
			}
			want, got = session(t, redisAddr, proto, reqs...), session(t, addr, proto, reqs...)
			for i := range reqs {
				if got[i].String() != want[i].String() {
					t.Errorf("%q\n rlserver %s\n    Redis %s", reqs[i], got[i], want[i])
				}
			}
		})
	}
}

// compareNodes compares CLUSTER NODES texts field by field, except for
// the ID and the address, which differ.
func compareNodes(t *testing.T, got, want string) {
	t.Helper()
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	addr := regexp.MustCompile(`^[0-9.]*:\d+@\d+$`)
	if len(gl) != len(wl) || gl[len(gl)-1] != "" {
		t.Fatalf("CLUSTER NODES\n rlserver %q\n    Redis %q", got, want)
	}
	for i := range gl[:len(gl)-1] {
		g, w := strings.Fields(gl[i]), strings.Fields(wl[i])
		if len(g) != len(w) || !addr.MatchString(g[1]) || !addr.MatchString(w[1]) ||
			strings.Join(g[2:], " ") != strings.Join(w[2:], " ") {
			t.Errorf("CLUSTER NODES line %d\n rlserver %q\n    Redis %q", i, gl[i], wl[i])
		}
	}
}

// compareInfo compares CLUSTER INFO texts: the same fields in the same
// order, with the same values apart from the bus message counters.
func compareInfo(t *testing.T, got, want string) {
	t.Helper()
	gl, wl := strings.Split(got, "\r\n"), strings.Split(want, "\r\n")
	if len(gl) != len(wl) {
		t.Fatalf("CLUSTER INFO\n rlserver %q\n    Redis %q", got, want)
	}
	for i := range gl {
		gk, gv, _ := strings.Cut(gl[i], ":")
		wk, wv, _ := strings.Cut(wl[i], ":")
		if gk != wk || (gv != wv && !strings.HasPrefix(gk, "cluster_stats_messages")) {
			t.Errorf("CLUSTER INFO line %d: rlserver %q, Redis %q", i, gl[i], wl[i])
		}
	}
}

// TestClusterMultiLikeRedis runs the same transactions on a real Redis
// Cluster (SET) and on rlserver (RL.CHECK) and wants the same replies,
// apart from the queued commands' own.
func TestClusterMultiLikeRedis(t *testing.T) {
	redisAddr := startRedisCluster(t)
	_, addr := startSolo(t)
	type pair struct{ redis, ours string }
	set := func(k string) pair {
		return pair{resp("SET", k, "1"), resp("RL.CHECK", k, "fixed", "10", "1m")}
	}
	same := func(args ...string) pair { return pair{resp(args...), resp(args...)} }
	for name, flow := range map[string][]pair{
		"one slot":      {same("MULTI"), set("{u}a"), same("PING"), set("{u}b"), same("EXEC")},
		"two slots":     {same("MULTI"), set("a"), set("b"), same("EXEC"), same("EXEC")},
		"dirty, two":    {same("MULTI"), set("a"), set("b"), same("NOSUCH"), same("EXEC")},
		"dirty, one":    {same("MULTI"), same("NOSUCH"), set("a"), same("EXEC")},
		"keyless":       {same("MULTI"), same("PING"), same("EXEC")},
		"cluster in tx": {same("MULTI"), same("CLUSTER", "KEYSLOT", "a"), set("a"), same("EXEC")},
	} {
		var rreqs, oreqs []string
		for _, p := range flow {
			rreqs, oreqs = append(rreqs, p.redis), append(oreqs, p.ours)
		}
		for _, proto := range []int{2, 3} {
			want, got := session(t, redisAddr, proto, rreqs...), session(t, addr, proto, oreqs...)
			for i := range flow {
				w, g := want[i].String(), got[i].String()
				if want[i].typ == '*' && got[i].typ == '*' { // EXEC's replies differ
					w, g = strconv.Itoa(len(want[i].elems)), strconv.Itoa(len(got[i].elems))
				}
				if w != g {
					t.Errorf("%s, RESP%d, step %d %q\n rlserver %s\n    Redis %s", name, proto, i, oreqs[i], got[i], want[i])
				}
			}
		}
	}
}

// TestClusterDisabledLikeRedis compares a server without a Cluster with a
// Redis without cluster support.
func TestClusterDisabledLikeRedis(t *testing.T) {
	redisAddr := redistest.Start(t)
	_, addr := startServer(t, Config{})
	reqs := []string{
		resp("CLUSTER", "SLOTS"), resp("CLUSTER", "SHARDS"), resp("CLUSTER", "NODES"), resp("CLUSTER", "INFO"),
		resp("CLUSTER", "MYID"), resp("CLUSTER", "KEYSLOT", "foo"), resp("CLUSTER", "HELP"),
		resp("CLUSTER", "COUNTKEYSINSLOT", "1"), resp("CLUSTER", "COUNTKEYSINSLOT", "x"),
		resp("CLUSTER", "KEYSLOT"), resp("CLUSTER", "HELP", "x"), resp("CLUSTER", "FOO"), resp("CLUSTER"),
		resp("CLUSTER", "MEET", "127.0.0.1", "1"), resp("READONLY"), resp("READWRITE"),
		resp("CONFIG", "GET", "cluster-enabled"), resp("INFO", "cluster"),
	}
	for _, proto := range []int{2, 3} {
		want, got := session(t, redisAddr, proto, reqs...), session(t, addr, proto, reqs...)
		for i := range reqs {
			if got[i].String() != want[i].String() {
				t.Errorf("RESP%d %q\n rlserver %s\n    Redis %s", proto, reqs[i], got[i], want[i])
			}
		}
	}
}

func newClusterClient(t testing.TB, addr string, proto int, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: []string{addr}, Protocol: proto}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGoRedisClusterClient(t *testing.T) {
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		for _, readOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("RESP%d/ReadOnly=%v", proto, readOnly), func(t *testing.T) {
				f, addr := startSolo(t)
				c := newClusterClient(t, addr, proto, func(o *redis.ClusterOptions) { o.ReadOnly = readOnly })
				used := map[int]bool{}
				for i := range 300 {
					key := fmt.Sprintf("user:%d", i)
					used[slots.Of([]byte(key))] = true
					v, err := c.Do(ctx, "RL.CHECK", key, "fixed", 10, "1m").Result()
					if err != nil {
						t.Fatalf("RL.CHECK %s: %v", key, err)
					}
					if got := asInts(t, v); fmt.Sprint(got) != "[1 10 9 0 60000]" {
						t.Fatalf("RL.CHECK %s = %v", key, got)
					}
				}
				if len(used) < 250 || f.Len() != 300 {
					t.Fatalf("%d slots used, %d keys stored; want >= 250 and 300", len(used), f.Len())
				}
				// A transaction on one slot.
				cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Do(ctx, "RL.CHECK", "{tx}a", "fixed", 2, "1m")
					p.Do(ctx, "RL.CHECK", "{tx}b", "fixed", 2, "1m")
					p.Do(ctx, "RL.CHECK", "{tx}a", "fixed", 2, "1m")
					return nil
				})
				if err != nil {
					t.Fatalf("TxPipelined on one slot: %v", err)
				}
				var got []string
				for _, cmd := range cmds {
					got = append(got, fmt.Sprint(cmd.(*redis.Cmd).Val()))
				}
				if want := "[1 2 1 0 60000] [1 2 1 0 60000] [1 2 0 0 60000]"; strings.Join(got, " ") != want {
					t.Fatalf("TxPipelined = %v, want %s", got, want)
				}
				// Across slots: CROSSSLOT.
				_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Do(ctx, "RL.CHECK", "a", "fixed", 2, "1m")
					p.Do(ctx, "RL.CHECK", "b", "fixed", 2, "1m")
					return nil
				})
				if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
					t.Fatalf("TxPipelined across slots: %v, want CROSSSLOT", err)
				}
				// A plain pipeline spreads over slots.
				cmds, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i := range 50 {
						p.Do(ctx, "RL.PEEK", fmt.Sprintf("user:%d", i), "fixed", 10, "1m")
					}
					return nil
				})
				if err != nil || len(cmds) != 50 {
					t.Fatalf("Pipelined: %d replies, %v", len(cmds), err)
				}
				if n, err := c.ClusterKeySlot(ctx, "{user1000}.following").Result(); err != nil || n != 3443 {
					t.Fatalf("CLUSTER KEYSLOT = %d, %v", n, err)
				}
			})
		}
	}
}

// TestGoRedisFollowsMoved has node A claim every slot in its view but
// answer MOVED to node B for each: go-redis follows to B.
func TestGoRedisFollowsMoved(t *testing.T) {
	ctx := context.Background()
	fb, addrB := startSolo(t)
	fa, addrA := startSolo(t)
	fa.setRoute(func(slot int) error { return fmt.Errorf("MOVED %d %s", slot, addrB) })
	for _, proto := range []int{2, 3} {
		c := newClusterClient(t, addrA, proto)
		for i := range 20 {
			key := fmt.Sprintf("moved:%d:%d", proto, i)
			v, err := c.Do(ctx, "RL.CHECK", key, "token", 5, 60).Result()
			if err != nil {
				t.Fatalf("RESP%d RL.CHECK %s: %v", proto, key, err)
			}
			if got := asInts(t, v); fmt.Sprint(got) != "[1 5 4 0 12000]" {
				t.Fatalf("RESP%d RL.CHECK %s = %v", proto, key, got)
			}
		}
	}
	if fa.Len() != 0 || fb.Len() != 40 {
		t.Fatalf("A holds %d keys, B %d; want 0 and 40", fa.Len(), fb.Len())
	}
}

func TestRedisCLICluster(t *testing.T) {
	_, addrB := startSolo(t)
	fa, addrA := startSolo(t)
	// -c against the node that serves the key.
	if got := redisCLI(t, addrB, "-c", "RL.CHECK", "cli:1", "token", "100", "60"); got != "1\n100\n99\n0\n600" {
		t.Fatalf("redis-cli -c RL.CHECK = %q", got)
	}
	if got := redisCLI(t, addrB, "-c", "CLUSTER", "KEYSLOT", "cli:1"); got != strconv.Itoa(slots.Of([]byte("cli:1"))) {
		t.Fatalf("redis-cli -c CLUSTER KEYSLOT = %q", got)
	}
	if got := redisCLI(t, addrB, "-c", "CLUSTER", "NODES"); !strings.Contains(got, "myself,master - 0 0 0 connected 0-16383") {
		t.Fatalf("redis-cli -c CLUSTER NODES = %q", got)
	}
	// -c against a node that redirects it: it follows MOVED.
	fa.setRoute(func(slot int) error { return fmt.Errorf("MOVED %d %s", slot, addrB) })
	if got := redisCLI(t, addrA, "-c", "RL.CHECK", "cli:1", "token", "100", "60"); !strings.HasSuffix(got, "1\n100\n98\n0\n1200") {
		t.Fatalf("redis-cli -c RL.CHECK through MOVED = %q", got)
	}
	// Without -c it shows the redirection.
	if got := redisCLI(t, addrA, "RL.CHECK", "cli:1", "token", "100", "60"); !strings.HasPrefix(got, "MOVED ") {
		t.Fatalf("redis-cli RL.CHECK without -c = %q", got)
	}
}

// pairViews returns the views of a two-node cluster, from node A at
// addrA and from node B at addrB: A leads the group of slots 0-8191, B the
// group of 8192-16383, each with the other as replica.
func pairViews(t testing.TB, addrA, addrB string) (ClusterView, ClusterView) {
	t.Helper()
	a, b := soloView(t, addrA).Nodes[0], soloView(t, addrB).Nodes[0]
	a.ID, a.Name, b.ID, b.Name, b.Myself = idA, "a", idB, "b", false
	v := ClusterView{MyID: idA, OK: true, Epoch: 3, Nodes: []ClusterNode{a, b}, Ranges: []SlotRange{
		{Start: 0, End: 8191, Group: 0, Master: idA, Replicas: []string{idB}},
		{Start: 8192, End: 16383, Group: 1, Master: idB, Replicas: []string{idA}},
	}}
	w := v
	w.MyID, w.Nodes = idB, []ClusterNode{v.Nodes[0], v.Nodes[1]}
	w.Nodes[0].Myself, w.Nodes[1].Myself = false, true
	return v, w
}

// startPair starts a two-node cluster (see pairViews): each node serves
// the slots its group owns and answers MOVED to the other for the rest.
func startPair(t testing.TB) (fa, fb *fakeCluster, addrA, addrB string) {
	t.Helper()
	fa, addrA = startSolo(t)
	fb, addrB = startSolo(t)
	va, vb := pairViews(t, addrA, addrB)
	fa.setView(va)
	fb.setView(vb)
	fa.setRoute(func(slot int) error {
		if slot >= 8192 {
			return fmt.Errorf("MOVED %d %s", slot, addrB)
		}
		return nil
	})
	fb.setRoute(func(slot int) error {
		if slot < 8192 {
			return fmt.Errorf("MOVED %d %s", slot, addrA)
		}
		return nil
	})
	return fa, fb, addrA, addrB
}

// TestGoRedisTwoNodes sends keys of every slot through go-redis to a
// two-node cluster: each lands on the node that leads its slot.
func TestGoRedisTwoNodes(t *testing.T) {
	ctx := context.Background()
	fa, fb, addrA, _ := startPair(t)
	for _, proto := range []int{2, 3} {
		c := newClusterClient(t, addrA, proto)
		for i := range 200 {
			key := fmt.Sprintf("two:%d:%d", proto, i)
			if _, err := c.Do(ctx, "RL.CHECK", key, "fixed", 10, "1m").Result(); err != nil {
				t.Fatalf("RESP%d RL.CHECK %s: %v", proto, key, err)
			}
		}
	}
	if fa.Len() == 0 || fb.Len() == 0 || fa.Len()+fb.Len() != 400 {
		t.Fatalf("A holds %d keys, B %d; want 400 between them", fa.Len(), fb.Len())
	}
}

// benchmark runs redis-benchmark --cluster against addr with args and
// returns its output and error.
func benchmark(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	bin := testutil.RequireTool(t, "redis-benchmark", "apt-get install redis-tools")
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(bin, append([]string{"--cluster", "-h", host, "-p", port}, args...)...).CombinedOutput()
	return string(out), err
}

// TestRedisBenchmarkCluster runs redis-benchmark --cluster. It wants two
// masters or more: against one node that claims every slot it refuses to
// run, exactly as against a real one-node Redis Cluster; against a
// two-node cluster it runs, with the keys' {tag} placeholder that it
// needs to send each key to the node that serves it.
func TestRedisBenchmarkCluster(t *testing.T) {
	args := []string{"-n", "2000", "-c", "4", "RL.CHECK", "k:__rand_int__", "token", "100", "60"}
	_, solo := startSolo(t)
	got, err := benchmark(t, solo, args...)
	want, werr := benchmark(t, startRedisCluster(t), args...)
	if got != want || (err == nil) != (werr == nil) {
		t.Fatalf("redis-benchmark --cluster %v\n rlserver %v %q\n    Redis %v %q", args, err, got, werr, want)
	}

	fa, fb, addrA, _ := startPair(t)
	args[5] = "k:{tag}:__rand_int__"
	out, err := benchmark(t, addrA, args...)
	if err != nil {
		t.Fatalf("redis-benchmark --cluster %v: %v\n%s", args, err, out)
	}
	for _, bad := range []string{"Error", "ERR", "MOVED", "CROSSSLOT", "Invalid", "WARNING"} {
		if strings.Contains(out, bad) {
			t.Fatalf("redis-benchmark --cluster output has %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "Cluster has 2 master nodes") || !strings.Contains(out, "requests per second") {
		t.Fatalf("redis-benchmark --cluster output:\n%s", out)
	}
	if fa.Len() == 0 || fb.Len() == 0 {
		t.Fatalf("A holds %d keys, B %d: redis-benchmark did not use both", fa.Len(), fb.Len())
	}
}

// TestDispatchClusterDoesNotAllocate: routing a key (slot and Route) adds
// no allocation to RL.CHECK.
func TestDispatchClusterDoesNotAllocate(t *testing.T) {
	f := newFakeCluster(threeNodes())
	s := New(Config{Limiter: f})
	c := &conn{s: s, proto: 2, authed: true}
	argv := [][]byte{[]byte("RL.CHECK"), []byte("{user1000}.api"), []byte("token"), []byte("100"), []byte("60")}
	now := t0
	s.dispatch(c, argv, now)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1e6
		c.out = c.out[:0]
		s.dispatch(c, argv, now)
	})
	if allocs != 0 || len(c.out) == 0 || c.out[0] != '*' {
		t.Fatalf("%.1f allocs per command, reply %q; want 0 and an array", allocs, c.out)
	}
}

// BenchmarkDispatchCheckCluster is BenchmarkDispatchCheck with a Cluster
// Limiter, whose every key is routed.
func BenchmarkDispatchCheckCluster(b *testing.B) {
	s := New(Config{Limiter: newFakeCluster(threeNodes())})
	benchDispatchCheck(b, s, &conn{s: s, proto: 2, authed: true})
}
