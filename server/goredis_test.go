package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func newClient(t testing.TB, addr string, protocol int, opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: addr, Protocol: protocol}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func asInts(t testing.TB, v any) []int64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("reply %#v is not an array", v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			t.Fatalf("element %d of %#v is not an integer", i, v)
		}
		out[i] = n
	}
	return out
}

func TestGoRedisBothProtocols(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			_, addr := startServer(t, Config{Clock: fakeClock()})
			ctx := context.Background()
			c := newClient(t, addr, proto, func(o *redis.Options) { o.ClientName = "gw" })
			if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
				t.Fatalf("PING = %q, %v", got, err)
			}
			if name, err := c.ClientGetName(ctx).Result(); err != nil || name != "gw" {
				t.Fatalf("CLIENT GETNAME = %q, %v", name, err)
			}
			v, err := c.Do(ctx, "RL.CHECK", "user:1", "gcra", 30, 60, "BURST", 16).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := asInts(t, v); fmt.Sprint(got) != "[1 16 15 0 2000]" {
				t.Fatalf("RL.CHECK gcra = %v, want [1 16 15 0 2000]", got)
			}
			v, err = c.Do(ctx, "CL.THROTTLE", "user123", 15, 30, 60, 1).Result()
			if err != nil || fmt.Sprint(asInts(t, v)) != "[0 16 15 -1 2]" {
				t.Fatalf("CL.THROTTLE = %v, %v; want [0 16 15 -1 2]", v, err)
			}
			_, err = c.Do(ctx, "RL.CHECK", "user:1", "fixed", 30, 60).Result()
			if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
				t.Fatalf("wrong algorithm: err = %v, want WRONGTYPE", err)
			}
			cfg, err := c.ConfigGet(ctx, "save").Result()
			if err != nil || len(cfg) != 1 {
				t.Fatalf("CONFIG GET save = %v, %v", cfg, err)
			}
			if n, err := c.DBSize(ctx).Result(); err != nil || n != 2 {
				t.Fatalf("DBSIZE = %d, %v; want 2", n, err)
			}
			info, err := c.Info(ctx, "keyspace").Result()
			if err != nil || !strings.Contains(info, "db0:keys=2") {
				t.Fatalf("INFO keyspace = %q, %v", info, err)
			}
		})
	}
}

func TestGoRedisPipeline(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	ctx := context.Background()
	c := newClient(t, addr, 3)
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 5; i++ {
			p.Do(ctx, "RL.CHECK", "pipe", "log", 3, "1s")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var allowed []int64
	for _, cmd := range cmds {
		allowed = append(allowed, asInts(t, cmd.(*redis.Cmd).Val())[0])
	}
	if fmt.Sprint(allowed) != "[1 1 1 0 0]" {
		t.Fatalf("pipelined decisions = %v, want [1 1 1 0 0]", allowed)
	}
}

func TestGoRedisAuth(t *testing.T) {
	_, addr := startServer(t, Config{RequirePass: "pw"})
	ctx := context.Background()
	good := newClient(t, addr, 3, func(o *redis.Options) { o.Password = "pw" })
	if err := good.Ping(ctx).Err(); err != nil {
		t.Fatalf("with the password: %v", err)
	}
	bad := newClient(t, addr, 3, func(o *redis.Options) { o.Password = "nope" })
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong password: err = %v, want WRONGPASS", err)
	}
	none := newClient(t, addr, 2)
	if err := none.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("no password: err = %v, want NOAUTH", err)
	}
}

// TestConcurrentClients: 32 clients × 100 checks on one key with limit 1000
// per hour admit exactly 1000 for fixed and log, and at most 1000 plus the
// refill during the run for the bucket algorithms.
func TestConcurrentClients(t *testing.T) {
	for _, algo := range []string{"fixed", "sliding", "log", "token", "leaky", "gcra"} {
		t.Run(algo, func(t *testing.T) {
			// Real time, started at a whole hour so the run cannot straddle
			// a window boundary.
			start := time.Now()
			clock := func() int64 { return t0/3600e9*3600e9 + int64(time.Since(start)) }
			_, addr := startServer(t, Config{Clock: clock})
			ctx := context.Background()
			var admitted, total int64
			var mu sync.Mutex
			var wg sync.WaitGroup
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 3})
					defer c.Close()
					n := int64(0)
					for i := 0; i < 100; i++ {
						v, err := c.Do(ctx, "RL.CHECK", "hot", algo, 1000, "1h").Result()
						if err != nil {
							t.Error(err)
							return
						}
						n += v.([]any)[0].(int64)
					}
					mu.Lock()
					admitted, total = admitted+n, total+100
					mu.Unlock()
				}()
			}
			wg.Wait()
			// The whole run takes far less than the 3.6 s one refill needs.
			if admitted != 1000 {
				t.Fatalf("%s admitted %d of %d, want exactly 1000", algo, admitted, total)
			}
		})
	}
}

func TestErrorsAreRedisErrors(t *testing.T) {
	_, addr := startServer(t, Config{})
	c := newClient(t, addr, 3)
	err := c.Do(context.Background(), "RL.CHECK", "k", "token", "abc", "1m").Err()
	var rerr redis.Error
	if !errors.As(err, &rerr) || !strings.HasPrefix(err.Error(), "ERR invalid limit 'abc'") {
		t.Fatalf("err = %v, want a redis.Error naming the limit", err)
	}
}
