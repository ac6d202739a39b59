package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/slots"
)

// slotClient is the Redis Cluster client of the tests that kill nodes: a
// plain client per node, each key's slot, MOVED followed, and TRYAGAIN,
// CLUSTERDOWN or an unreachable node retried on the next node until the
// call's deadline (10 s when the context has none). Unlike a cluster
// client it reports whether a try may have changed the state before the
// one that answered (DoUnsure), which those tests need to bound what a
// crash can double-count. What users run — go-redis's ClusterClient and
// redis-py's RedisCluster with their default options — is tested through
// planned moves and kills in moves_test.go, churn_test.go and
// rolling_test.go.
type slotClient struct {
	mu      sync.Mutex
	addrs   []string
	clients map[string]*redis.Client
	route   map[int]string // slot → the node that answered it last
	// stopOnUnsure makes a call whose try may have changed the state end
	// with that try's error instead of trying again (the kill tests count
	// such a request as in flight).
	stopOnUnsure bool
}

func newSlotClient(addrs []string) *slotClient {
	return &slotClient{addrs: append([]string(nil), addrs...), clients: map[string]*redis.Client{}, route: map[int]string{}}
}

func (c *slotClient) client(addr string) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.clients[addr]
	if cl == nil {
		cl = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 2, DialTimeout: time.Second,
			ReadTimeout: 5 * time.Second})
		c.clients[addr] = cl
	}
	return cl
}

// Do runs args (a command whose key is args[1]) on the node that serves
// the key's slot.
func (c *slotClient) Do(ctx context.Context, args ...any) *redis.Cmd {
	cmd, _ := c.DoUnsure(ctx, args...)
	return cmd
}

// DoUnsure is Do, and reports whether a try before the last one may have
// changed the state: its node lost the group's lead before the change
// was committed (TRYAGAIN ... leadership moved ...), or did not answer.
func (c *slotClient) DoUnsure(ctx context.Context, args ...any) (cmd *redis.Cmd, unsure bool) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	slot := slots.Of([]byte(fmt.Sprint(args[1])))
	addr := c.addrFor(slot)
	for attempt := 0; ; attempt++ {
		cmd = c.client(addr).Do(ctx, args...)
		err := cmd.Err()
		if moved, to := isMoved(err); moved {
			addr = to
			continue
		}
		if err == nil || errors.Is(err, redis.Nil) {
			c.mu.Lock()
			c.route[slot] = addr
			c.mu.Unlock()
			return cmd, unsure
		}
		if !retry(err) || ctx.Err() != nil {
			return cmd, unsure
		}
		if s := err.Error(); strings.Contains(s, "leadership moved") || !strings.HasPrefix(s, "TRYAGAIN") && !strings.HasPrefix(s, "CLUSTERDOWN") {
			if c.stopOnUnsure {
				return cmd, true
			}
			unsure = true
		}
		addr = c.next(addr)
		select {
		case <-ctx.Done():
			return cmd, unsure
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *slotClient) addrFor(slot int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.route[slot]; ok {
		return a
	}
	return c.addrs[slot%len(c.addrs)]
}

// next returns the node after addr, among the ones the client was given.
func (c *slotClient) next(addr string) string {
	for i, a := range c.addrs {
		if a == addr {
			return c.addrs[(i+1)%len(c.addrs)]
		}
	}
	return c.addrs[0]
}

// Close closes every client.
func (c *slotClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clients {
		cl.Close()
	}
	return nil
}

// isMoved reports whether err is a MOVED redirect, and to where.
func isMoved(err error) (bool, string) {
	if err == nil {
		return false, ""
	}
	f := strings.Fields(err.Error())
	if len(f) == 3 && f[0] == "MOVED" {
		if _, err := strconv.Atoi(f[1]); err == nil {
			return true, f[2]
		}
	}
	return false, ""
}

// retry reports whether a call that failed with err may be sent again,
// to another node: the slot's group is electing or cannot be reached.
func retry(err error) bool {
	s := err.Error()
	var ne net.Error
	return strings.HasPrefix(s, "TRYAGAIN") || strings.HasPrefix(s, "CLUSTERDOWN") || errors.As(err, &ne) ||
		strings.Contains(s, "connection refused") || strings.Contains(s, "EOF") || strings.Contains(s, "reset by peer")
}
