package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/envoyrls/config"
	"github.com/rlserver/rlserver/internal/clientid"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
	"gopkg.in/yaml.v3"
)

// defaultRestAfter is --rest-after's default.
const defaultRestAfter = 10 * time.Second

// Config is everything rlserver is started with. Values come, from lowest
// to highest precedence, from the defaults, the YAML file named by
// --config, RLSERVER_* environment variables and command-line flags.
type Config struct {
	Listen          string
	HTTP            string
	DataDir         string
	RequirePass     string
	AdminToken      string
	MetricsAuth     bool
	TrustedProxies  string // CIDRs, comma-separated: the gateways /v1/forward-auth takes X-Forwarded-For from
	IPv6Prefix      int    // network length by which /v1/forward-auth counts IPv6 callers
	MaxKeyBytes     int
	MaxLogLimit     int64
	LuaTimeLimit    time.Duration // a script past it is busy: BUSY to what waits for its keys, SCRIPT KILL stops it
	LuaMemoryLimit  int64         // bytes one script's Lua values may hold
	LuaInterpretAll bool          // no native handlers for the limiter libraries' scripts
	Shards          int
	LogLevel        string
	LogFormat       string // text or json
	ConfigFile      string
	RulesFile       string
	MaxConfigBytes  int64  // bound on a --rules file, and on --envoy-config's files together
	GRPC            string // Envoy's rate limit service (see envoy.go)
	EnvoyConfig     string
	EnvoyCharging   string // each, stop-when-over or all-or-nothing (envoyrls.Charging)
	Pprof           string
	Procs           int
	IOLoops         int
	// RestAfter is --rest-after: how long an idle process waits before
	// it runs Go code on one core (package internal/rest); 0 never.
	RestAfter time.Duration
	// process is set by main, for the process it runs: run governs
	// GOMAXPROCS only then, never in a test's process.
	process         bool
	MaxClients      int
	GRPCMaxClients  int // gRPC connections, a budget apart from MaxClients
	Timeout         int // seconds
	MaxMemory       int64
	MaxBlocks       int // 0: sized to memory (maxBlocks)
	MaxMemoryPolicy string
	TLSCert         string
	TLSKey          string
	TLSCACert       string

	// Durability (see cluster): --data-dir "" keeps everything in memory.
	NodeID           string
	Consistency      string
	FlushInterval    time.Duration
	SnapshotEntries  uint64
	SnapshotBytes    int64
	SnapshotInterval time.Duration
	TrailingLogs     uint64
	MinFreeDisk      int64
	DiskBallast      int64
	AcceptDataLoss   bool

	// Cluster (see cluster.OpenCluster): --peers (or a data directory that
	// holds a cluster node) makes this node one of a cluster.
	RaftAddr           string
	RaftAdvertise      string
	Peers              string
	Join               string
	Proxy              bool
	Groups             int
	Announce           string
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration

	// TestClockShiftFile names a file holding a duration that shifts the
	// wall clock the node reads (for tests; see testclock.go).
	TestClockShiftFile string

	// given holds the names of the flags set by the command line, the
	// environment or the config file (not defaults): a cluster node's
	// data directory supplies the others it remembers (recallSettings).
	given map[string]bool
}

// The default addresses of the node's listeners, which the health and
// rls-check commands ask by default too.
const (
	defaultListen = "127.0.0.1:6379"
	defaultHTTP   = "127.0.0.1:8080"
	defaultGRPC   = "127.0.0.1:8081"
)

// DefaultMaxConfigBytes is --max-config-bytes's default, the Envoy config
// parser's: 4 MiB, some 40,000 rules.
const DefaultMaxConfigBytes = config.DefaultMaxBytes

// flagSet declares every flag on a fresh FlagSet bound to cfg, with cfg's
// current values as defaults.
func flagSet(cfg *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("rlserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Listen, "listen", defaultListen, "RESP address to listen on (host:port)")
	fs.StringVar(&cfg.HTTP, "http", defaultHTTP, `HTTP address for /rules, /v1/check, /v1/checkrules, /healthz, /readyz, /metrics; "" disables it`)
	fs.StringVar(&cfg.DataDir, "data-dir", "./data", "data directory; created and locked at start")
	fs.StringVar(&cfg.RequirePass, "requirepass", "", "password clients must AUTH with; empty disables AUTH")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", `password of the "admin" user and HTTP bearer token, required for FLUSHALL and rule changes when set`)
	fs.BoolVar(&cfg.MetricsAuth, "metrics-auth", false, "GET /metrics needs a bearer token too (--requirepass or --admin-token); by default it is open, as Prometheus scrapers expect")
	fs.StringVar(&cfg.TrustedProxies, "trusted-proxies", "127.0.0.0/8,::1", `CIDRs or addresses of the gateways whose headers /v1/forward-auth believes: the target, X-Forwarded-For, X-User-Id, X-Api-Key, X-Tier (comma-separated; "" trusts none)`)
	fs.IntVar(&cfg.IPv6Prefix, "ipv6-prefix", clientid.DefaultIPv6Prefix, "network length (1 to 128) by which /v1/forward-auth counts IPv6 callers: every address of a /64 is one ip; 128 counts each address")
	fs.IntVar(&cfg.MaxKeyBytes, "max-key-bytes", shards.DefaultMaxKeyBytes, "longest key accepted, in bytes")
	fs.Int64Var(&cfg.MaxLogLimit, "max-log-limit", engine.DefaultMaxLogLimit, "largest limit accepted for the log algorithm")
	fs.DurationVar(&cfg.LuaTimeLimit, "lua-time-limit", script.DefaultTimeLimit, "a script running longer is busy: commands that would wait for its keys get -BUSY, and SCRIPT KILL stops it if it has not written (Redis's lua-time-limit)")
	fs.Var(sizeValue{&cfg.LuaMemoryLimit}, "lua-memory-limit", "memory one script's Lua values may hold before it stops with an error (64mb)")
	fs.BoolVar(&cfg.LuaInterpretAll, "lua-interpret-all", false, "run every script in the Lua interpreter; by default the scripts of go-redis/redis_rate, ulule/limiter and Python limits are recognised by their sha1 and run natively (docs/scripts.md)")
	fs.IntVar(&cfg.Shards, "shards", shards.DefaultShards, "lock stripes for key state (rounded up to a power of two)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text (key=value lines) or json (one JSON object a line, with time, level and msg)")
	fs.StringVar(&cfg.ConfigFile, "config", "", "YAML file of flag values (keys are flag names)")
	fs.StringVar(&cfg.RulesFile, "rules", "", "YAML file of rules loaded at start: a list of {id, target, tier, key_type, algo, limit, window, burst, shadow}")
	fs.Var(sizeValue{&cfg.MaxConfigBytes}, "max-config-bytes", "largest --rules file, and largest --envoy-config (a directory: its files together), read at start or reload (4mb; a larger one is refused, and the last good one stays in use)")
	fs.StringVar(&cfg.GRPC, "grpc", defaultGRPC, `gRPC address of Envoy's rate limit service (RLS v3), with grpc.health.v1 and reflection; "" disables it`)
	fs.StringVar(&cfg.EnvoyConfig, "envoy-config", "", "YAML file, or directory of them, in envoyproxy/ratelimit's format (domain, descriptors): the rate limit service's limits, reloaded when changed and on SIGHUP")
	fs.StringVar(&cfg.EnvoyCharging, "envoy-charging", "each", "what a rate limit service request charges: each (every descriptor, also when the answer is OVER_LIMIT, as envoyproxy/ratelimit), stop-when-over (its STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true, which this flag's default also reads) or all-or-nothing (nothing when refused, every counter at once when allowed)")
	fs.IntVar(&cfg.Procs, "procs", 0, "CPU cores the server runs Go code on at once (GOMAXPROCS); 0 means all")
	fs.DurationVar(&cfg.RestAfter, "rest-after", defaultRestAfter, "with --procs 0: after this long without a client request, and using under a quarter of a core, run Go code on one core until the next request or load comes (an idle node wakes less); 0 never")
	fs.IntVar(&cfg.IOLoops, "io-loops", 0, "event loops serving client connections (Linux); 0 means one fewer than --procs (at least one), or one per --procs on a durable node with --consistency strong; -1 a goroutine per connection")
	fs.Var(sizeValue{&cfg.MaxMemory}, "maxmemory", "bound on the memory of key state and client connections (256mb, 2gb; 0 is none)")
	fs.IntVar(&cfg.MaxBlocks, "max-blocks", 0, "most blocked identifiers held at once; a new block beyond it drops those nearest to their end first (rlserver_blocks_dropped_total); 0 sizes it to memory: a quarter of --maxmemory at 256 bytes a block, or 1000000 without --maxmemory")
	fs.StringVar(&cfg.MaxMemoryPolicy, "maxmemory-policy", "volatile-ttl", "at --maxmemory: volatile-ttl evicts the state nearest to fresh, noeviction refuses new keys with -OOM")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) file: serve RESP and HTTP over TLS only (with --tls-key)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.StringVar(&cfg.TLSCACert, "tls-ca-cert", "", "PEM file of the CA certificates that must have signed every client's certificate (clients must present one)")
	fs.IntVar(&cfg.MaxClients, "maxclients", server.DefaultMaxClients, "client connections served at once, RESP and HTTP together; one more RESP client gets \"max number of clients reached\", one more HTTP client is closed")
	fs.IntVar(&cfg.GRPCMaxClients, "grpc-maxclients", 1024, "connections to --grpc served at once, a budget apart from --maxclients (so that gRPC clients cannot lock out RESP, HTTP or /healthz); one more is closed")
	fs.IntVar(&cfg.Timeout, "timeout", 0, "close a RESP client idle for this many seconds; 0 means never")
	fs.StringVar(&cfg.Pprof, "pprof", "", `address for Go's /debug/pprof profiles (e.g. 127.0.0.1:6060); "" disables it`)
	fs.StringVar(&cfg.NodeID, "node-id", "", `this node's name in its Raft group; "" takes the one the data directory holds, else "node1"`)
	fs.StringVar(&cfg.Consistency, "consistency", "fast", "fast: replies at once, changes logged every --flush-interval (a crash forgets at most that); strong: a reply waits for its changes to be in the log")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", cluster.DefaultFlushInterval, "how often changed keys are written to the log (fast mode's bound on what a crash forgets)")
	fs.Uint64Var(&cfg.SnapshotEntries, "snapshot-entries", cluster.DefaultSnapshotEntries, "take a snapshot (and compact the log) after this many log entries")
	fs.Var(sizeValue{&cfg.SnapshotBytes}, "snapshot-bytes", "take a snapshot (and compact the log) after this many bytes of log entries, e.g. 64mb")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cluster.DefaultSnapshotInterval, "how often the snapshot thresholds are checked")
	fs.BoolVar(&cfg.AcceptDataLoss, "accept-data-loss", false, "start on a damaged data directory (a write-ahead log or table lost or cut) with what is left, logging every loss at ERROR, instead of refusing to start")
	fs.Uint64Var(&cfg.TrailingLogs, "trailing-logs", cluster.DefaultTrailingLogs, "log entries kept after a snapshot")
	fs.Var(sizeValue{&cfg.MinFreeDisk}, "min-free-disk", "with less free space than this on the data directory's disk, state changes are refused with -MISCONF (reads go on) until space is freed; a start needs an eighth of it; 0 turns the guard off")
	fs.Var(sizeValue{&cfg.DiskBallast}, "disk-ballast", "size of the ballast file kept in the data directory, deleted to give the node room when the disk fills up and made again when space returns; 0 keeps none")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", "127.0.0.1:7379", "cluster: address of the node's Raft listener, which carries every Raft group and the nodes' internal calls")
	fs.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", `cluster: the address the other nodes reach this node's Raft listener at; "" is --raft-addr (which then must not be 0.0.0.0)`)
	fs.StringVar(&cfg.Peers, "peers", "", "cluster: the initial members as id=raftaddr,... (this node included; the same list on every node); empty runs a standalone node")
	fs.StringVar(&cfg.Join, "join", "", "cluster: join the running cluster that the node at this RESP address (host:port) belongs to, as --node-id with --raft-addr")
	fs.BoolVar(&cfg.Proxy, "proxy", false, "cluster: forward the commands of slots this node does not serve to the nodes that do, instead of answering MOVED (for clients that are not cluster-aware)")
	fs.IntVar(&cfg.Groups, "groups", cluster.DefaultGroups, "cluster: Raft groups the 16384 slots are split over, fixed when the cluster is first started")
	fs.StringVar(&cfg.Announce, "announce", "", `cluster: host clients reach this node at (MOVED, CLUSTER SLOTS); "" takes --listen's host, or --raft-addr's when --listen's is unspecified (0.0.0.0)`)
	fs.DurationVar(&cfg.HeartbeatTimeout, "raft-heartbeat-timeout", cluster.DefaultHeartbeatTimeout, "cluster: a follower that hears nothing from its leader this long (randomized up to twice it) starts an election")
	fs.DurationVar(&cfg.ElectionTimeout, "raft-election-timeout", cluster.DefaultElectionTimeout, "cluster: how long a candidate waits for votes before it tries again")
	fs.DurationVar(&cfg.LeaderLeaseTimeout, "raft-leader-lease-timeout", cluster.DefaultLeaderLeaseTimeout, "cluster: a leader that cannot reach a majority this long steps down (at most --raft-heartbeat-timeout; fast mode doubles it)")
	fs.StringVar(&cfg.TestClockShiftFile, "test-clock-shift-file", "", `for tests only: a file holding a duration ("-1h", "24h") added to the wall clock this node reads, read every 10ms, so that tests can step a real node's clock; "" reads the system's clock as it is`)
	return fs
}

// errHelp is returned by loadConfig for --help, after writing the usage;
// errVersion for --version, after writing the version.
var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

// onlyOnCommandLine are the flags that the environment and the config file
// do not set.
var onlyOnCommandLine = map[string]bool{"config": true, "version": true}

// loadConfig builds the Config from args, the environment and the YAML file.
// getenv is os.Getenv in production.
func loadConfig(args []string, getenv func(string) string, stdout io.Writer) (Config, error) {
	cfg := Config{SnapshotBytes: cluster.DefaultSnapshotBytes, MinFreeDisk: cluster.DefaultMinFreeDisk, DiskBallast: cluster.DefaultDiskBallast,
		MaxConfigBytes: DefaultMaxConfigBytes, LuaMemoryLimit: script.DefaultMemoryLimit}
	fs := flagSet(&cfg)
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, stdout)
			return cfg, errHelp
		}
		return cfg, fmt.Errorf("%v (see --help)", err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if *showVersion {
		fmt.Fprintln(stdout, "rlserver "+version)
		return cfg, errVersion
	}
	explicit := map[string]bool{} // on the command line
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	cfg.given = map[string]bool{} // anywhere
	for k := range explicit {
		cfg.given[k] = true
	}
	if cfg.ConfigFile == "" && !explicit["config"] {
		cfg.ConfigFile = getenv("RLSERVER_CONFIG")
	}
	if cfg.ConfigFile != "" {
		if err := applyYAML(fs, cfg.ConfigFile, explicit, cfg.given); err != nil {
			return cfg, err
		}
	}
	if err := applyEnv(fs, getenv, explicit, cfg.given); err != nil {
		return cfg, err
	}
	if v := getenv(stopIncrementEnv); v != "" && !cfg.given["envoy-charging"] {
		stop, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("invalid value %q for %s: want true or false", v, stopIncrementEnv)
		}
		if stop {
			cfg.EnvoyCharging = envoyrls.ChargeStopWhenOver.String()
		}
	}
	return cfg, cfg.Validate()
}

// stopIncrementEnv is envoyproxy/ratelimit's switch, read as its
// containers set it: true is --envoy-charging stop-when-over, unless
// --envoy-charging is given (flag, RLSERVER_ENVOY_CHARGING or config file).
const stopIncrementEnv = "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"

// envName returns the environment variable for a flag: RLSERVER_MAX_KEY_BYTES.
func envName(flagName string) string {
	return "RLSERVER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func applyEnv(fs *flag.FlagSet, getenv func(string) string, explicit, given map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(envName(f.Name))
		if err != nil || explicit[f.Name] || v == "" || onlyOnCommandLine[f.Name] {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), e)
		}
		given[f.Name] = true
	})
	return err
}

func applyYAML(fs *flag.FlagSet, path string, explicit, given map[string]bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %v", err)
	}
	var values map[string]yaml.Node
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("config file %s: %v", path, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		node := values[k]
		if fs.Lookup(k) == nil || onlyOnCommandLine[k] {
			return fmt.Errorf("config file %s: unknown key %q (keys are flag names, see --help)", path, k)
		}
		if node.Kind != yaml.ScalarNode {
			return fmt.Errorf("config file %s: %s must be a single value", path, k)
		}
		if explicit[k] {
			continue
		}
		if err := fs.Set(k, node.Value); err != nil {
			return fmt.Errorf("config file %s: invalid value %q for %s: %v", path, node.Value, k, err)
		}
		given[k] = true
	}
	return nil
}

// Validate checks the values that flag parsing cannot.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("--listen must not be empty")
	case c.MaxKeyBytes < 1 || c.MaxKeyBytes > 1<<20:
		return fmt.Errorf("--max-key-bytes %d: want 1 to 1048576", c.MaxKeyBytes)
	case c.LuaTimeLimit < time.Millisecond:
		return fmt.Errorf("--lua-time-limit %s: want at least 1ms", c.LuaTimeLimit)
	case c.LuaMemoryLimit < 1<<20:
		return fmt.Errorf("--lua-memory-limit %d: want at least 1mb", c.LuaMemoryLimit)
	case c.MaxLogLimit < 1 || c.MaxLogLimit > 1<<24:
		return fmt.Errorf("--max-log-limit %d: want 1 to 16777216", c.MaxLogLimit)
	case c.Shards < 1 || c.Shards > 1<<16:
		return fmt.Errorf("--shards %d: want 1 to 65536", c.Shards)
	case c.Procs < 0 || c.Procs > 1<<12:
		return fmt.Errorf("--procs %d: want 0 (all cores) to 4096", c.Procs)
	case c.RestAfter < 0 || c.RestAfter > 0 && c.RestAfter < time.Second:
		return fmt.Errorf("--rest-after %s: want 0 (never) or at least 1s", c.RestAfter)
	case c.IOLoops < -1 || c.IOLoops > 1<<12:
		return fmt.Errorf("--io-loops %d: want -1 (none), 0 (one fewer than the cores) to 4096", c.IOLoops)
	case c.Consistency != "fast" && c.Consistency != "strong":
		return fmt.Errorf("--consistency %q: want fast or strong", c.Consistency)
	case c.FlushInterval < 100*time.Microsecond || c.FlushInterval > time.Minute:
		return fmt.Errorf("--flush-interval %s: want 100µs to 1m", c.FlushInterval)
	case c.SnapshotEntries < 16:
		return fmt.Errorf("--snapshot-entries %d: want at least 16", c.SnapshotEntries)
	case c.SnapshotBytes < 1<<20:
		return fmt.Errorf("--snapshot-bytes %d: want at least 1mb", c.SnapshotBytes)
	case c.MaxBlocks < 0 || c.MaxBlocks > 1<<28:
		return fmt.Errorf("--max-blocks %d: want 0 (sized to memory) to 268435456", c.MaxBlocks)
	case !validCharging(c.EnvoyCharging):
		return fmt.Errorf("--envoy-charging %q: want each, stop-when-over or all-or-nothing", c.EnvoyCharging)
	case c.MaxConfigBytes < 1<<10 || c.MaxConfigBytes > 1<<30:
		return fmt.Errorf("--max-config-bytes %d: want 1kb to 1gb", c.MaxConfigBytes)
	case c.MinFreeDisk != 0 && c.MinFreeDisk < 1<<20:
		return fmt.Errorf("--min-free-disk %d: want 0 (no guard) or at least 1mb", c.MinFreeDisk)
	case c.SnapshotInterval < 10*time.Millisecond:
		return fmt.Errorf("--snapshot-interval %s: want at least 10ms", c.SnapshotInterval)
	case c.NodeID != "" && !validNodeID(c.NodeID):
		return fmt.Errorf("--node-id %q: want 1 to 64 letters, digits, '-', '_' or '.'", c.NodeID)
	case c.Groups < 1 || c.Groups > cluster.MaxGroups:
		return fmt.Errorf("--groups %d: want 1 to %d", c.Groups, cluster.MaxGroups)
	case (c.Peers != "" || c.Join != "") && c.DataDir == "":
		return errors.New("--peers and --join need a --data-dir: a cluster node keeps its Raft logs there")
	case c.Peers != "" && c.Join != "":
		return errors.New("--peers starts a new cluster, --join joins a running one: give one of them")
	case c.Join != "" && c.NodeID == "":
		return errors.New("--join needs --node-id: the name the new node has in the cluster")
	case c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < 5*time.Millisecond:
		return fmt.Errorf("--raft-heartbeat-timeout %s, --raft-election-timeout %s: want at least 5ms", c.HeartbeatTimeout, c.ElectionTimeout)
	case c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return fmt.Errorf("--raft-leader-lease-timeout %s: want 5ms to --raft-heartbeat-timeout (%s)", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.MaxClients < 1 || c.MaxClients > 1<<20:
		return fmt.Errorf("--maxclients %d: want 1 to 1048576", c.MaxClients)
	case c.GRPCMaxClients < 1 || c.GRPCMaxClients > 1<<20:
		return fmt.Errorf("--grpc-maxclients %d: want 1 to 1048576", c.GRPCMaxClients)
	case c.Timeout < 0 || c.Timeout > 1<<31-1:
		return fmt.Errorf("--timeout %d: want 0 (never) or a number of seconds", c.Timeout)
	case c.IPv6Prefix < 1 || c.IPv6Prefix > 128:
		return fmt.Errorf("--ipv6-prefix %d: want 1 to 128 (64: a /64 is one caller; 128: each address is)", c.IPv6Prefix)
	case c.MetricsAuth && c.RequirePass == "" && c.AdminToken == "":
		return errors.New("--metrics-auth needs --requirepass or --admin-token: they are the tokens /metrics would ask for")
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both, or neither")
	}
	if c.TLSCACert != "" && c.TLSCert == "" {
		return errors.New("--tls-ca-cert needs --tls-cert and --tls-key")
	}
	if _, err := parsePeers(c.Peers); err != nil {
		return err
	}
	if _, err := clientid.ParsePrefixes(c.TrustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	if _, err := shards.ParsePolicy(c.MaxMemoryPolicy); err != nil {
		return fmt.Errorf("--maxmemory-policy %q: want volatile-ttl or noeviction", c.MaxMemoryPolicy)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger returns the logger of --log-level and --log-format (which
// Validate has checked), writing to w.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		opts.ReplaceAttr = readableJSON
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: rlserver [flags]\n\nA rate-limiter server that speaks the Redis protocol.\n"+
		"Every flag can also be set in the --config YAML file (key = flag name) or as RLSERVER_<NAME>.\n"+
		"`rlserver health [--http addr] [--timeout 3s] [--tls]` exits 0 if the node at addr is ready (GET /readyz), else 1.\n\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "version" {
			fmt.Fprintf(w, "  --%s\n      %s\n", f.Name, f.Usage)
			return
		}
		fmt.Fprintf(w, "  --%s (default %q, env %s)\n      %s\n", f.Name, f.DefValue, envName(f.Name), f.Usage)
	})
}

// validNodeID reports whether s is a usable node id.
func validNodeID(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != ""
}

// sizeValue is a flag of bytes written as Redis writes memory sizes: a
// number with an optional b, kb, mb, gb (powers of 1024) or k, m, g
// (powers of 1000) suffix, case-insensitive.
type sizeValue struct{ p *int64 }

func (v sizeValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// parseSize parses a byte size such as 256mb, 2gb or 1000000 (see
// sizeValue), for every size flag.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a size such as 256mb, 2gb or 1000000")
	}
	return n * mult, nil
}

// parsePeers parses --peers: id=raftaddr,... with distinct ids and
// addresses of the form host:port.
func parsePeers(s string) ([]cluster.Peer, error) {
	if s == "" {
		return nil, nil
	}
	var out []cluster.Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || !validNodeID(id) {
			return nil, fmt.Errorf("--peers %q: want id=host:port,... (ids of letters, digits, '-', '_' or '.')", s)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers: %s=%q: want host:port", id, addr)
		}
		if seen[id] {
			return nil, fmt.Errorf("--peers: %q appears twice", id)
		}
		seen[id] = true
		out = append(out, cluster.Peer{ID: id, Raft: addr})
	}
	return out, nil
}

// validCharging reports whether s names an envoyrls.Charging.
func validCharging(s string) bool {
	_, ok := envoyrls.ParseCharging(s)
	return ok
}
