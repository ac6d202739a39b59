package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(nil, env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Listen: "127.0.0.1:6379", HTTP: "127.0.0.1:8080", DataDir: "./data",
		MaxKeyBytes: 1024, MaxLogLimit: 10000, Shards: 256, LogLevel: "info"}
	if cfg != want {
		t.Fatalf("defaults = %+v\nwant %+v", cfg, want)
	}
}

func TestConfigPrecedence(t *testing.T) {
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
	// The file can also come from RLSERVER_CONFIG.
	cfg, err = loadConfig(nil, env(map[string]string{"RLSERVER_CONFIG": file}), nil)
	if err != nil || cfg.Listen != "0.0.0.0:7000" {
		t.Fatalf("RLSERVER_CONFIG: %+v, %v", cfg, err)
	}
}

func TestConfigErrors(t *testing.T) {
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
		{[]string{"--io-loops", "-2"}, nil, "--io-loops -2: want -1 (none), 0 (one per core) to 4096"},
		{[]string{"--log-level", "loud"}, nil, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
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

func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	_, err := loadConfig([]string{"--help"}, env(nil), &out)
	if err != errHelp {
		t.Fatalf("err = %v, want errHelp", err)
	}
	for _, f := range []string{"--listen (default \"127.0.0.1:6379\"", "--http", "--data-dir (default \"./data\"",
		"--requirepass", "--admin-token", "--max-key-bytes (default \"1024\"", "--max-log-limit (default \"10000\"",
		"--log-level", "--config", "--io-loops (default \"0\"", "RLSERVER_MAX_KEY_BYTES"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("--help lacks %q:\n%s", f, out.String())
		}
	}
}
