// Package server speaks RESP2 and RESP3 to Redis clients and answers
// rlserver's commands: RL.CHECK, RL.PEEK, RL.RESET, CL.THROTTLE,
// RL.CHECKRULES and RL.RULE.SET/GET/DEL/LIST, plus the
// connection and admin commands that redis-cli, go-redis and
// redis-benchmark expect (PING, HELLO, AUTH, CLIENT, INFO, COMMAND, ...).
//
// It parses with github.com/tidwall/redcon's Reader and builds replies with
// redcon's Append functions, but runs its own connection loop so that it can
// bound request sizes, stamp each pipelined batch with one clock reading,
// and drain connections on shutdown. Limiter state lives behind the Limiter
// interface declared here; a single-node shards.Store or a cluster node
// satisfies it. Errors become RESP errors in one place, replyError.
package server
