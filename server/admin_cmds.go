package server

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/match"
)

func adminCommands() []*command {
	return []*command{
		{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, group: "server",
			summary: "Number of keys holding limiter state", handler: cmdDBSize},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, group: "server",
			summary: "Server information and statistics",
			args:    []argDoc{{name: "section", typ: "string", optional: true, multiple: true}}, handler: cmdInfo},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, group: "server",
			summary: "COMMAND [COUNT | LIST | INFO name... | DOCS [name...] | GETKEYS cmd args...]",
			args:    []argDoc{{name: "subcommand", typ: "string", optional: true}}, handler: cmdCommand,
			subs: []string{"count", "list", "info", "docs", "getkeys"}},
		{name: "config", arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, group: "server",
			summary: "CONFIG GET parameter [parameter ...]",
			args:    []argDoc{{name: "subcommand", typ: "string"}}, handler: cmdConfig,
			subs: []string{"get"}},
		{name: "flushall", arity: -1, flags: []string{"write"}, group: "server",
			summary: "Forget every key's limiter state (admin user only when --admin-token is set)",
			args: []argDoc{{name: "flush-type", typ: "oneof", optional: true, sub: []argDoc{
				{name: "async", typ: "pure-token", token: "ASYNC"}, {name: "sync", typ: "pure-token", token: "SYNC"}}}},
			handler: cmdFlushAll},
	}
}

// DBSIZE
func cmdDBSize(s *Server, c *conn, args [][]byte, now int64) {
	c.writeInt(int64(c.limiter().Len()))
}

// FLUSHALL [ASYNC|SYNC]
func cmdFlushAll(s *Server, c *conn, args [][]byte, now int64) {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "ASYNC") && !equalFold(args[1], "SYNC")) {
		c.writeError("ERR syntax error")
		return
	}
	if s.cfg.AdminToken != "" && !c.admin {
		c.writeError("NOPERM this user has no permissions to run the 'flushall' command " +
			"(AUTH admin <admin-token> first)")
		return
	}
	if err := c.limiter().Flush(); err != nil {
		c.writeErr(err)
		return
	}
	s.log.Info("FLUSHALL", "client", c.addr)
	c.writeOK()
}

// CONFIG GET parameter [parameter ...]
func cmdConfig(s *Server, c *conn, args [][]byte, now int64) {
	if !equalFold(args[1], "GET") {
		c.writeError("ERR CONFIG " + strings.ToUpper(string(args[1])) +
			" is not supported: rlserver is configured by flags, a YAML file or RLSERVER_* variables")
		return
	}
	if len(args) < 3 {
		c.writeError("ERR wrong number of arguments for 'config|get' command")
		return
	}
	params := s.configParams()
	var out kv
	for i := 0; i+1 < len(params); i += 2 {
		for _, pat := range args[2:] {
			if match.Match(params[i], strings.ToLower(string(pat))) {
				out = append(out, params[i], params[i+1])
				break
			}
		}
	}
	c.writeValue(out)
}

// configParams lists what CONFIG GET answers: the keys redis-benchmark and
// clients ask for, and rlserver's own limits.
func (s *Server) configParams() []string {
	maxMem, policy, _ := s.memoryBound()
	addr := ""
	if a := s.Addr(); a != nil {
		addr = a.String()
	}
	host, port := addr, ""
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		host, port = addr[:i], addr[i+1:]
	}
	return []string{
		"appendonly", "no", "bind", host, "cluster-enabled", yesNo(s.cluster() != nil), "databases", "1",
		"maxclients", strconv.Itoa(s.cfg.MaxClients), "maxmemory", strconv.FormatInt(maxMem, 10), "maxmemory-policy", policy,
		"max-key-bytes", strconv.Itoa(s.cfg.MaxKeyBytes),
		"max-log-limit", strconv.FormatInt(s.cfg.MaxLogLimit, 10),
		"port", port, "proto-max-bulk-len", strconv.Itoa(s.cfg.MaxRequest),
		"save", "", "timeout", strconv.FormatInt(int64(s.cfg.IdleTimeout/time.Second), 10),
	}
}

// yesNo returns Redis's word for a boolean configuration value.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// INFO [section ...]
func cmdInfo(s *Server, c *conn, args [][]byte, now int64) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		for _, sec := range strings.Split(strings.ToLower(string(a)), ",") {
			want[sec] = true
		}
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b strings.Builder
	for _, sec := range s.infoSections(c.limiter(), now) {
		if !all && !want[sec.name] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(sec.name[:1]) + sec.name[1:] + "\r\n")
		for i := 0; i+1 < len(sec.fields); i += 2 {
			b.WriteString(sec.fields[i] + ":" + sec.fields[i+1] + "\r\n")
		}
	}
	c.writeVerbatim(b.String()) // a verbatim string in RESP3, as Redis 7 answers
}

type infoSection struct {
	name   string
	fields []string
}

func (s *Server) infoSections(lim Limiter, now int64) []infoSection {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	state, clients := lim.MemoryBytes(), s.ConnMemory()
	maxMem, policy, evicted := s.memoryBound()
	keys := int64(lim.Len())
	port := ""
	if a := s.Addr(); a != nil {
		port = a.String()[strings.LastIndexByte(a.String(), ':')+1:]
	}
	uptime := int64(time.Since(s.started) / time.Second)
	mode, clusterEnabled := "standalone", "0"
	if s.cluster() != nil {
		mode, clusterEnabled = "cluster", "1"
	}
	return []infoSection{
		{"server", []string{"redis_version", redisVersion, "rlserver_version", s.cfg.Version,
			"redis_mode", mode, "os", runtime.GOOS + " " + runtime.GOARCH, "arch_bits", "64",
			"go_version", runtime.Version(), "gomaxprocs", itoa(int64(runtime.GOMAXPROCS(0))),
			"process_id", itoa(int64(processID())), "tcp_port", port,
			"uptime_in_seconds", itoa(uptime), "uptime_in_days", itoa(uptime / 86400)}},
		{"clients", []string{"connected_clients", itoa(int64(s.ConnCount())), "maxclients", itoa(int64(s.cfg.MaxClients))}},
		{"stats", []string{"total_connections_received", itoa(s.totalConns.Load()),
			"total_commands_processed", itoa(s.commandsProcessed()),
			"rejected_connections", itoa(s.rejected.Load()), "evicted_keys", itoa(evicted)}},
		{"memory", s.memoryInfo(&ms, state, clients, maxMem, policy)},
		{"persistence", s.persistenceInfo()},
		{"replication", []string{"role", "master", "connected_slaves", "0"}},
		{"cluster", []string{"cluster_enabled", clusterEnabled}},
		{"keyspace", keyspace(keys, s.persistent())},
		{"scripts", s.scriptsInfo()},
		{"rlserver", s.rlserverInfo(keys, lim.MemoryBytes())},
	}
}

// memoryInfo is INFO's memory section: used_memory is the key state, the
// connections and, with Config.HeapMemory, the rest of the live heap
// (used_memory_overhead), which is what --maxmemory bounds; the peak is
// the largest live heap seen, or used_memory without HeapMemory.
func (s *Server) memoryInfo(ms *runtime.MemStats, state, clients, maxMem int64, policy string) []string {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	var overhead, peak int64
	if s.cfg.HeapMemory != nil {
		overhead, peak = s.cfg.HeapMemory()
	}
	used := state + clients + overhead
	peak = max(peak, used)
	return []string{"used_memory", itoa(used), "used_memory_peak", itoa(peak), "used_memory_state", itoa(state),
		"used_memory_clients", itoa(clients), "used_memory_overhead", itoa(overhead),
		"used_memory_heap", itoa(int64(ms.HeapAlloc)), "used_memory_rss", itoa(residentBytes(ms)),
		"maxmemory", itoa(maxMem), "maxmemory_policy", policy}
}

// memoryBound returns the limiter's memory bound, its policy and the keys
// evicted so far: 0, "noeviction" and 0 for a limiter without one.
func (s *Server) memoryBound() (int64, string, int64) {
	if s.bound == nil {
		return 0, "noeviction", 0
	}
	return s.bound.MaxMemory(), s.bound.MaxMemoryPolicy(), s.bound.Evicted()
}

// residentBytes returns the process's resident memory, from
// /proc/self/statm, or the memory the Go runtime holds where there is
// no such file.
func residentBytes(ms *runtime.MemStats) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return pages * int64(os.Getpagesize())
			}
		}
	}
	return int64(ms.Sys)
}

// keyspace is INFO's keyspace section: keys, and those with an expiry
// (every key but the persistent Redis values).
func keyspace(keys, persistent int64) []string {
	if keys == 0 {
		return nil
	}
	expires := max(keys-persistent, 0)
	return []string{"db0", "keys=" + strconv.FormatInt(keys, 10) + ",expires=" + strconv.FormatInt(expires, 10) + ",avg_ttl=0"}
}

// Persistents is implemented by a Limiter that counts its keys without an
// expiry (Redis values with no TTL; limiter state always expires).
type Persistents interface {
	Persistent() int
}

// persistent returns the Limiter's keys without an expiry, 0 if it does
// not count them.
func (s *Server) persistent() int64 {
	if p, ok := s.cfg.Limiter.(Persistents); ok {
		return int64(p.Persistent())
	}
	return 0
}

func (s *Server) rlserverInfo(keys, stateBytes int64) []string {
	out := []string{"keys", strconv.FormatInt(keys, 10),
		"state_bytes", strconv.FormatInt(stateBytes, 10),
		"max_key_bytes", strconv.Itoa(s.cfg.MaxKeyBytes),
		"max_log_limit", strconv.FormatInt(s.cfg.MaxLogLimit, 10)}
	var offset int64
	if s.cfg.ClockOffset != nil {
		offset = s.cfg.ClockOffset() / 1e6
	}
	out = append(out, "clock_offset_ms", strconv.FormatInt(offset, 10))
	return append(out, s.metrics.checkFields()...)
}

func (s *Server) commandsProcessed() int64 {
	n := s.totalCommands.Load()
	s.mu.Lock()
	for c := range s.conns {
		n += c.commands.Load()
	}
	s.mu.Unlock()
	return n
}

// PersistenceReporter is implemented by a Limiter that keeps its state on
// disk (cluster.Node): it gives the fields of INFO persistence, as
// alternating names and values.
type PersistenceReporter interface {
	PersistenceInfo() []string
}

func (s *Server) persistenceInfo() []string {
	if p, ok := s.cfg.Limiter.(PersistenceReporter); ok {
		return p.PersistenceInfo()
	}
	return []string{"loading", "0", "rdb_changes_since_last_save", "0", "aof_enabled", "0", "rl_durable", "0"}
}
