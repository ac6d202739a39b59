// Package client is the Go client of rlserver, on github.com/redis/go-redis/v9:
// typed RL.CHECK and RL.CHECKRULES calls, pipelined batches of checks, and
// net/http middleware that limits the requests of an HTTP service through
// rlserver's rules. From another module:
//
//	go get github.com/rlserver/rlserver/client
//
//	import "github.com/rlserver/rlserver/client"
//
// Then:
//
//	c := client.Dial("127.0.0.1:6379")
//	res, err := c.Check(ctx, "user:42", client.Limit{Algo: "sliding", Limit: 100, Window: time.Minute}, 1)
//	if err == nil && !res.Allowed {
//		// wait res.RetryAfter
//	}
//
// The middleware identifies the caller (client IP, honouring
// X-Forwarded-For only from trusted proxies; a user id; an API key), asks
// RL.CHECKRULES, sets the headers rlserver's HTTP API sends (X-RateLimit-*,
// RateLimit and RateLimit-Policy as draft-ietf-httpapi-ratelimit-headers-10
// writes them, Retry-After), answers 429 with a JSON body when denied, and,
// when rlserver does not answer within the timeout, fails open, closed, or
// into a grace mode (FailGrace) that decides locally for a bounded time with
// a share of each rule's limit per process, from the rules it last learned
// (grace.go).
package client
