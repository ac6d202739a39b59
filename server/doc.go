// Package server speaks RESP2 and RESP3 to Redis clients and answers
// rlserver's commands: RL.CHECK, RL.PEEK, RL.RESET, CL.THROTTLE,
// RL.CHECKRULES and RL.RULE.SET/GET/DEL/LIST, plus the
// connection and admin commands that redis-cli, go-redis and
// redis-benchmark expect (PING, HELLO, AUTH, CLIENT, INFO, COMMAND, ...),
// and MULTI/EXEC/DISCARD (multi.go), whose queue runs inside the Limiter's
// Transact with its keys locked (Transactor).
//
// It builds replies with github.com/tidwall/redcon's Append functions and
// runs its own connection loop and RESP parser (resp.go: arguments are
// slices of the read buffer, so a steady stream of requests allocates
// nothing), so that it can bound request sizes, parse a whole pipelined
// batch and stamp it with one clock reading, let the Limiter prefetch the
// batch's keys (Prefetcher), do socket I/O with raw system calls inside the
// netpoller (rawio.go), serve plain TCP connections from a few epoll event
// loops rather than a goroutine each (loop_linux.go), and drain
// connections on shutdown. Limiter state
// lives behind the Limiter interface declared here; a single-node
// shards.Store or a cluster node satisfies it. Errors become RESP errors in
// one place, replyError.
package server
