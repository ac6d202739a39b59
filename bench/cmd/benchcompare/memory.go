package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rlserver/rlserver/bench/load"
)

// Mem compares the memory of one algorithm's keys in both servers.
type Mem struct {
	Algo        string  `json:"algo"`
	RLBytes     float64 `json:"rlserver_bytes_per_key"`
	RLKeys      int64   `json:"rlserver_keys"`
	RedisScript string  `json:"redis_script"`
	RedisBytes  float64 `json:"redis_bytes_per_key"`
	RedisKeys   int64   `json:"redis_keys"` // Redis keys (fixed and sliding keep one per window)
	Ratio       float64 `json:"ratio"`      // rlserver / redis
}

// memWindow is long enough that no state expires while it is measured.
const memWindow = 86400

// memory loads o.memKeys keys per algorithm into each server, one request
// per key, and reports the growth of the heap per key: for rlserver the
// live heap after a forced GC (its /debug/gc on the --pprof address, the
// same number INFO's used_memory reports after a GC), for Redis INFO's
// used_memory. Both servers are emptied first.
func memory(ctx context.Context, o options, rl, rd *server, shas map[string]string) ([]Mem, error) {
	var out []Mem
	rows := append([]string{"incr"}, algos...)
	for _, a := range rows {
		m := Mem{Algo: a}
		if a != "incr" {
			before, after, keys, err := measure(ctx, o, rl, fmt.Sprintf("RL.CHECK key:%s %s 100 %d", load.RandInt, a, memWindow))
			if err != nil {
				return nil, err
			}
			m.RLBytes, m.RLKeys = float64(after-before)/float64(o.memKeys), keys
		}
		cmd := "INCR key:" + load.RandInt
		m.RedisScript = "INCR"
		if a != "incr" {
			sha, ok := shas[a]
			if !ok {
				out = append(out, m)
				continue
			}
			cmd, m.RedisScript = luaCmd(sha, 100, memWindow), a+".lua"
		}
		before, after, keys, err := measure(ctx, o, rd, cmd)
		if err != nil {
			return nil, err
		}
		m.RedisBytes, m.RedisKeys = float64(after-before)/float64(o.memKeys), keys
		if m.RLBytes > 0 && m.RedisBytes > 0 {
			m.Ratio = m.RLBytes / m.RedisBytes
		}
		fmt.Printf("  %-8s rlserver %6.1f B/key (%d keys)   redis %-12s %6.1f B/key (%d keys)\n",
			a, m.RLBytes, m.RLKeys, m.RedisScript, m.RedisBytes, m.RedisKeys)
		out = append(out, m)
	}
	return out, nil
}

// measure empties s, loads o.memKeys distinct keys with cmd and returns the
// memory before and after and the keys held.
func measure(ctx context.Context, o options, s *server, cmd string) (before, after, keys int64, err error) {
	if _, err = s.cli.Do("FLUSHALL"); err != nil {
		return
	}
	if before, err = s.memory(); err != nil {
		return
	}
	tpl, err := load.ParseTemplate(cmd)
	if err != nil {
		return
	}
	res, err := load.Run(ctx, load.Config{Addr: s.addr, Conns: o.conns, Pipeline: 16, Keys: uint64(o.memKeys),
		Dist: "seq", Requests: o.memKeys, Templates: []*load.Template{tpl}})
	if err != nil {
		return
	}
	if res.Errors > 0 || res.Denied > 0 {
		err = fmt.Errorf("loading keys with %q: %d errors (%s), %d denied", cmd, res.Errors, res.FirstError, res.Denied)
		return
	}
	time.Sleep(200 * time.Millisecond) // let the server close the load's connections
	if after, err = s.memory(); err != nil {
		return
	}
	keys, err = s.dbsize()
	return
}

// memory returns the server's memory in use: the live heap after a GC for
// rlserver, used_memory for Redis.
func (s *server) memory() (int64, error) {
	if s.pprof != "" {
		return s.heapAfterGC()
	}
	return s.usedMemory()
}
