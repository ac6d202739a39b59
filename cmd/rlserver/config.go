package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Config is everything rlserver is started with. Values come, from lowest
// to highest precedence, from the defaults, the YAML file named by
// --config, RLSERVER_* environment variables and command-line flags.
type Config struct {
	Listen      string
	HTTP        string
	DataDir     string
	RequirePass string
	AdminToken  string
	MaxKeyBytes int
	MaxLogLimit int64
	Shards      int
	LogLevel    string
	ConfigFile  string
	RulesFile   string
	Pprof       string
	Procs       int
	IOLoops     int
}

// flagSet declares every flag on a fresh FlagSet bound to cfg, with cfg's
// current values as defaults.
func flagSet(cfg *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("rlserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:6379", "RESP address to listen on (host:port)")
	fs.StringVar(&cfg.HTTP, "http", "127.0.0.1:8080", `HTTP address for /rules, /v1/check, /v1/checkrules, /healthz, /readyz, /metrics; "" disables it`)
	fs.StringVar(&cfg.DataDir, "data-dir", "./data", "data directory; created and locked at start")
	fs.StringVar(&cfg.RequirePass, "requirepass", "", "password clients must AUTH with; empty disables AUTH")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", `password of the "admin" user and HTTP bearer token, required for FLUSHALL and rule changes when set`)
	fs.IntVar(&cfg.MaxKeyBytes, "max-key-bytes", 1024, "longest key accepted, in bytes")
	fs.Int64Var(&cfg.MaxLogLimit, "max-log-limit", 10000, "largest limit accepted for the log algorithm")
	fs.IntVar(&cfg.Shards, "shards", 256, "lock stripes for key state (rounded up to a power of two)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.ConfigFile, "config", "", "YAML file of flag values (keys are flag names)")
	fs.StringVar(&cfg.RulesFile, "rules", "", "YAML file of rules loaded at start: a list of {id, target, tier, key_type, algo, limit, window, burst, shadow}")
	fs.IntVar(&cfg.Procs, "procs", 0, "CPU cores the server runs Go code on at once (GOMAXPROCS); 0 means all")
	fs.IntVar(&cfg.IOLoops, "io-loops", 0, "event loops serving client connections (Linux); 0 means one per --procs, -1 a goroutine per connection")
	fs.StringVar(&cfg.Pprof, "pprof", "", `address for Go's /debug/pprof profiles (e.g. 127.0.0.1:6060); "" disables it`)
	return fs
}

// errHelp is returned by loadConfig for --help, after writing the usage.
var errHelp = errors.New("help requested")

// loadConfig builds the Config from args, the environment and the YAML file.
// getenv is os.Getenv in production.
func loadConfig(args []string, getenv func(string) string, stdout io.Writer) (Config, error) {
	var cfg Config
	fs := flagSet(&cfg)
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
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if cfg.ConfigFile == "" && !explicit["config"] {
		cfg.ConfigFile = getenv("RLSERVER_CONFIG")
	}
	if cfg.ConfigFile != "" {
		if err := applyYAML(fs, cfg.ConfigFile, explicit); err != nil {
			return cfg, err
		}
	}
	if err := applyEnv(fs, getenv, explicit); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// envName returns the environment variable for a flag: RLSERVER_MAX_KEY_BYTES.
func envName(flagName string) string {
	return "RLSERVER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func applyEnv(fs *flag.FlagSet, getenv func(string) string, explicit map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(envName(f.Name))
		if err != nil || explicit[f.Name] || v == "" || f.Name == "config" {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), e)
		}
	})
	return err
}

func applyYAML(fs *flag.FlagSet, path string, explicit map[string]bool) error {
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
		if fs.Lookup(k) == nil || k == "config" {
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
	}
	return nil
}

// Validate checks the values that flag parsing cannot.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("--listen must not be empty")
	case c.DataDir == "":
		return errors.New("--data-dir must not be empty")
	case c.MaxKeyBytes < 1 || c.MaxKeyBytes > 1<<20:
		return fmt.Errorf("--max-key-bytes %d: want 1 to 1048576", c.MaxKeyBytes)
	case c.MaxLogLimit < 1 || c.MaxLogLimit > 1<<24:
		return fmt.Errorf("--max-log-limit %d: want 1 to 16777216", c.MaxLogLimit)
	case c.Shards < 1 || c.Shards > 1<<16:
		return fmt.Errorf("--shards %d: want 1 to 65536", c.Shards)
	case c.Procs < 0 || c.Procs > 1<<12:
		return fmt.Errorf("--procs %d: want 0 (all cores) to 4096", c.Procs)
	case c.IOLoops < -1 || c.IOLoops > 1<<12:
		return fmt.Errorf("--io-loops %d: want -1 (none), 0 (one per core) to 4096", c.IOLoops)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
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

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: rlserver [flags]\n\nA rate-limiter server that speaks the Redis protocol.\n"+
		"Every flag can also be set in the --config YAML file (key = flag name) or as RLSERVER_<NAME>.\n\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(w, "  --%s (default %q, env %s)\n      %s\n", f.Name, f.DefValue, envName(f.Name), f.Usage)
	})
}
