package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	parallel(t)
	cfg, err := loadConfig(nil, env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Listen: "127.0.0.1:6379", HTTP: "127.0.0.1:8080", GRPC: "127.0.0.1:8081", EnvoyCharging: "each", DataDir: "./data",
		TrustedProxies: "127.0.0.0/8,::1", IPv6Prefix: 64,
		MaxKeyBytes: 1024, MaxLogLimit: 10000, LuaTimeLimit: 5 * time.Second, LuaMemoryLimit: 64 << 20, Shards: 256, LogLevel: "info", LogFormat: "text", MaxClients: 10000, GRPCMaxClients: 1024,
		MaxMemoryPolicy: "volatile-ttl",
		Consistency:     "fast", FlushInterval: 10 * time.Millisecond, SnapshotEntries: 4096, SnapshotBytes: 64 << 20,
		SnapshotInterval: 10 * time.Second, TrailingLogs: 64, MinFreeDisk: 256 << 20, DiskBallast: 64 << 20,
		RaftAddr: "127.0.0.1:7379", Groups: 16, HeartbeatTimeout: 300 * time.Millisecond,
		ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 250 * time.Millisecond, MaxConfigBytes: 4 << 20,
		RestAfter: 10 * time.Second}
	if len(cfg.given) != 0 {
		t.Fatalf("given = %v with no flags, no environment and no file", cfg.given)
	}
	cfg.given = nil
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults = %+v\nwant %+v", cfg, want)
	}
}

// TestEnvoyChargingSwitch: --envoy-charging (flag, RLSERVER_ENVOY_CHARGING,
// config file) and envoyproxy/ratelimit's own STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT,
// which counts when --envoy-charging is not given.
func TestEnvoyChargingSwitch(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("envoy-charging: all-or-nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "each"},
		{nil, map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"}, "stop-when-over"},
		{nil, map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "false"}, "each"},
		{[]string{"--envoy-charging", "all-or-nothing"}, map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"}, "all-or-nothing"},
		{nil, map[string]string{"RLSERVER_ENVOY_CHARGING": "stop-when-over"}, "stop-when-over"},
		{[]string{"--config", file}, map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "1"}, "all-or-nothing"},
	} {
		cfg, err := loadConfig(c.args, env(c.env), nil)
		if err != nil || cfg.EnvoyCharging != c.want {
			t.Errorf("%v %v: %q %v, want %q", c.args, c.env, cfg.EnvoyCharging, err, c.want)
		}
	}
	if _, err := loadConfig(nil, env(map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "maybe"}), nil); err == nil ||
		!strings.Contains(err.Error(), "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT") {
		t.Errorf("a bad STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: %v", err)
	}
	if _, err := loadConfig([]string{"--envoy-charging", "some"}, env(nil), nil); err == nil || !strings.Contains(err.Error(), "--envoy-charging") {
		t.Errorf("a bad --envoy-charging: %v", err)
	}
}

func TestConfigPrecedence(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "rl.yaml")
	os.WriteFile(file, []byte("listen: 0.0.0.0:7000\nmax-key-bytes: 100\nmax-log-limit: 50\nlog-level: debug\n"), 0o644)
	e := env(map[string]string{"RLSERVER_MAX_KEY_BYTES": "200", "RLSERVER_LOG_LEVEL": "warn"})
	cfg, err := loadConfig([]string{"--config", file, "--log-level", "error"}, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	// flag > env > file > default
	if cfg.Listen != "0.0.0.0:7000" || cfg.MaxKeyBytes != 200 || cfg.MaxLogLimit != 50 || cfg.LogLevel != "error" {
		t.Fatalf("got %+v", cfg)
	}
	// given: what any of them set, for the settings a data directory remembers.
	wantGiven := map[string]bool{"config": true, "log-level": true, "listen": true, "max-key-bytes": true, "max-log-limit": true}
	if !reflect.DeepEqual(cfg.given, wantGiven) {
		t.Fatalf("given = %v, want %v", cfg.given, wantGiven)
	}
	// The file can also come from RLSERVER_CONFIG.
	cfg, err = loadConfig(nil, env(map[string]string{"RLSERVER_CONFIG": file}), nil)
	if err != nil || cfg.Listen != "0.0.0.0:7000" {
		t.Fatalf("RLSERVER_CONFIG: %+v, %v", cfg, err)
	}
}

// --metrics-auth is false by default and set, like every flag, by the
// command line, RLSERVER_METRICS_AUTH or the config file.
func TestMetricsAuthFlag(t *testing.T) {
	parallel(t)
	file := filepath.Join(t.TempDir(), "rl.yaml")
	os.WriteFile(file, []byte("metrics-auth: true\nadmin-token: adm\n"), 0o644)
	for _, c := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{[]string{"--requirepass", "pw"}, nil, false},
		{[]string{"--requirepass", "pw", "--metrics-auth"}, nil, true},
		{[]string{"--admin-token", "adm"}, map[string]string{"RLSERVER_METRICS_AUTH": "true"}, true},
		{[]string{"--config", file}, nil, true},
		{[]string{"--config", file, "--metrics-auth=false"}, nil, false},
	} {
		cfg, err := loadConfig(c.args, env(c.env), nil)
		if err != nil || cfg.MetricsAuth != c.want {
			t.Errorf("%v %v: MetricsAuth %v, %v; want %v", c.args, c.env, cfg.MetricsAuth, err, c.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: [a, b]\n"), 0o644)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("lisen: x\n"), 0o644)
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--bogus"}, nil, "flag provided but not defined: -bogus (see --help)"},
		{[]string{"--max-key-bytes", "abc"}, nil, `invalid value "abc" for flag -max-key-bytes`},
		{[]string{"--max-key-bytes", "0"}, nil, "--max-key-bytes 0: want 1 to 1048576"},
		{[]string{"--io-loops", "-2"}, nil, "--io-loops -2: want -1 (none), 0 (one fewer than the cores) to 4096"},
		{[]string{"--rest-after", "500ms"}, nil, "--rest-after 500ms: want 0 (never) or at least 1s"},
		{[]string{"--rest-after", "-1s"}, nil, "--rest-after -1s: want 0 (never) or at least 1s"},
		{[]string{"--maxclients", "0"}, nil, "--maxclients 0: want 1 to 1048576"},
		{[]string{"--grpc-maxclients", "0"}, nil, "--grpc-maxclients 0: want 1 to 1048576"},
		{[]string{"--maxmemory", "256xb"}, nil, `invalid value "256xb" for flag -maxmemory: want a size such as 256mb, 2gb or 1000000`},
		{[]string{"--maxmemory", "-1"}, nil, `invalid value "-1" for flag -maxmemory`},
		{[]string{"--tls-cert", "c.pem"}, nil, "--tls-cert and --tls-key go together: give both, or neither"},
		{[]string{"--tls-ca-cert", "ca.pem"}, nil, "--tls-ca-cert needs --tls-cert and --tls-key"},
		{[]string{"--maxmemory-policy", "allkeys-lru"}, nil, `--maxmemory-policy "allkeys-lru": want volatile-ttl or noeviction`},
		{nil, map[string]string{"RLSERVER_TIMEOUT": "-1"}, "--timeout -1: want 0 (never) or a number of seconds"},
		{[]string{"--metrics-auth"}, nil, "--metrics-auth needs --requirepass or --admin-token"},
		{[]string{"--metrics-auth=maybe"}, nil, `invalid boolean value "maybe" for -metrics-auth`},
		{[]string{"--requirepass", "pw"}, map[string]string{"RLSERVER_METRICS_AUTH": "yes"}, `invalid value "yes" for RLSERVER_METRICS_AUTH`},
		{[]string{"--log-level", "loud"}, nil, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"--consistency", "eventual"}, nil, `--consistency "eventual": want fast or strong`},
		{[]string{"--flush-interval", "0s"}, nil, "--flush-interval 0s: want 100µs to 1m"},
		{[]string{"--flush-interval", "5"}, nil, `invalid value "5" for flag -flush-interval`},
		{[]string{"--snapshot-bytes", "12parsecs"}, nil, "want a size such as 256mb, 2gb or 1000000"},
		{[]string{"--snapshot-bytes", "1kb"}, nil, "--snapshot-bytes 1024: want at least 1mb"},
		{[]string{"--min-free-disk", "100kb"}, nil, "--min-free-disk 102400: want 0 (no guard) or at least 1mb"},
		{[]string{"--disk-ballast", "lots"}, nil, "want a size such as 256mb, 2gb or 1000000"},
		{[]string{"--node-id", "a b"}, nil, `--node-id "a b": want 1 to 64 letters`},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"--peers", "n1"}, nil, `--peers "n1": want id=host:port,...`},
		{[]string{"--peers", "n1=x"}, nil, `--peers: n1="x": want host:port`},
		{[]string{"--peers", "n1=a:1,n1=b:2"}, nil, `--peers: "n1" appears twice`},
		{[]string{"--peers", "n1=a:1", "--data-dir", ""}, nil, "--peers and --join need a --data-dir"},
		{[]string{"--peers", "n1=a:1", "--join", "a:6379"}, nil, "give one of them"},
		{[]string{"--join", "a:6379"}, nil, "--join needs --node-id"},
		{[]string{"--groups", "0"}, nil, "--groups 0: want 1 to 1024"},
		{[]string{"--max-config-bytes", "10"}, nil, "--max-config-bytes 10: want 1kb to 1gb"},
		{nil, map[string]string{"RLSERVER_MAX_CONFIG_BYTES": "lots"}, `invalid value "lots" for RLSERVER_MAX_CONFIG_BYTES`},
		{[]string{"--max-blocks", "-1"}, nil, "--max-blocks -1: want 0 (sized to memory) to 268435456"},
		{[]string{"--raft-leader-lease-timeout", "1s"}, nil, "--raft-leader-lease-timeout 1s: want 5ms to --raft-heartbeat-timeout"},
		{nil, map[string]string{"RLSERVER_SHARDS": "x"}, `invalid value "x" for RLSERVER_SHARDS`},
		{[]string{"--config", bad}, nil, "listen must be a single value"},
		{[]string{"--config", unknown}, nil, `unknown key "lisen"`},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, nil, "config file: open"},
	}
	for _, c := range cases {
		_, err := loadConfig(c.args, env(c.env), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: err = %v, want it to contain %q", c.args, c.env, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error spans lines: %q", c.args, err)
		}
	}
}

func TestMaxMemorySizes(t *testing.T) {
	parallel(t)
	for in, want := range map[string]int64{"0": 0, "1000000": 1000000, "256mb": 256 << 20, "2GB": 2 << 30,
		"100k": 100000, "100kb": 102400, "3m": 3000000, "1g": 1000000000, "512b": 512} {
		cfg, err := loadConfig([]string{"--maxmemory", in}, env(nil), nil)
		if err != nil || cfg.MaxMemory != want {
			t.Errorf("--maxmemory %s: %d, %v; want %d", in, cfg.MaxMemory, err, want)
		}
	}
	cfg, err := loadConfig(nil, env(map[string]string{"RLSERVER_MAXMEMORY": "1gb", "RLSERVER_MAXMEMORY_POLICY": "noeviction"}), nil)
	if err != nil || cfg.MaxMemory != 1<<30 || cfg.MaxMemoryPolicy != "noeviction" {
		t.Fatalf("from the environment: %+v, %v", cfg, err)
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	parallel(t)
	var out bytes.Buffer
	_, err := loadConfig([]string{"--help"}, env(nil), &out)
	if err != errHelp {
		t.Fatalf("err = %v, want errHelp", err)
	}
	for _, f := range []string{"--listen (default \"127.0.0.1:6379\"", "--http", "--data-dir (default \"./data\"",
		"--requirepass", "--admin-token", "--metrics-auth (default \"false\", env RLSERVER_METRICS_AUTH)",
		"--max-key-bytes (default \"1024\"", "--max-log-limit (default \"10000\"",
		"--log-level", "--config", "--io-loops (default \"0\"", "RLSERVER_MAX_KEY_BYTES",
		"--maxclients (default \"10000\"", "--grpc-maxclients (default \"1024\"", "--timeout (default \"0\"", "--maxmemory (default \"0\"",
		"--maxmemory-policy (default \"volatile-ttl\"", "--tls-cert", "--tls-key", "--tls-ca-cert",
		"--peers", "--raft-addr (default \"127.0.0.1:7379\"", "--groups (default \"16\"", "--join", "--proxy",
		"--announce", "--raft-heartbeat-timeout (default \"300ms\"", "--raft-election-timeout", "--raft-leader-lease-timeout",
		"--min-free-disk (default \"268435456\"", "--disk-ballast (default \"67108864\"", "RLSERVER_MIN_FREE_DISK",
		"--max-config-bytes (default \"4194304\", env RLSERVER_MAX_CONFIG_BYTES)", "--max-blocks (default \"0\", env RLSERVER_MAX_BLOCKS)"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("--help lacks %q:\n%s", f, out.String())
		}
	}
}

func TestParseSize(t *testing.T) {
	parallel(t)
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "64mb": 64 << 20, "2GB": 2 << 30, "1k": 1000, "5m": 5e6, "7b": 7} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mb", "-1", "1.5gb", "9999999999gb", "1tb"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): no error", in)
		}
	}
}

func TestVersion(t *testing.T) {
	parallel(t)
	var out bytes.Buffer
	_, err := loadConfig([]string{"--version"}, env(nil), &out)
	if err != errVersion {
		t.Fatalf("err = %v, want errVersion", err)
	}
	if out.String() != "rlserver "+version+"\n" {
		t.Fatalf("--version printed %q", out.String())
	}
	// The environment and the config file do not ask for the version.
	if _, err := loadConfig(nil, env(map[string]string{"RLSERVER_VERSION": "true"}), &out); err != nil {
		t.Fatalf("RLSERVER_VERSION: %v", err)
	}
}

// TestMaxBlocksDefault: --max-blocks 0 is sized to --maxmemory (a quarter
// of it at blockCost a block, at least 1000), or 1000000 without it; a
// value given is taken as it is, from the config file too.
func TestMaxBlocksDefault(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 1000000},
		{[]string{"--maxmemory", "16mb"}, 16384},
		{[]string{"--maxmemory", "1mb"}, 1024},
		{[]string{"--maxmemory", "256kb"}, 1000},
		{[]string{"--maxmemory", "16mb", "--max-blocks", "77"}, 77},
	} {
		cfg, err := loadConfig(tc.args, env(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := maxBlocks(cfg); got != tc.want {
			t.Errorf("%v: maxBlocks %d, want %d", tc.args, got, tc.want)
		}
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("max-blocks: 500\nmax-config-bytes: 8mb\n"), 0o644)
	cfg, err := loadConfig([]string{"--config", file}, env(nil), nil)
	if err != nil || maxBlocks(cfg) != 500 || cfg.MaxConfigBytes != 8<<20 {
		t.Fatalf("from the config file: %d, %d, %v", cfg.MaxBlocks, cfg.MaxConfigBytes, err)
	}
}
