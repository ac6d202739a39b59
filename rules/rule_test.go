package rules

import (
	"errors"
	"strings"
	"testing"
)

func good() Rule {
	return Rule{ID: "free-users", Target: "/users/*", Tier: "free", KeyType: "user",
		Algo: "sliding", Limit: 100, Window: "1m"}
}

func TestValidateAcceptsGoodRules(t *testing.T) {
	for _, mod := range []func(*Rule){
		func(r *Rule) {},
		func(r *Rule) { r.Target, r.Tier = "*", "*" },
		func(r *Rule) { r.Target = "/login" },
		func(r *Rule) { r.Algo, r.Burst = "TOKEN", 20 },
		func(r *Rule) { r.Algo, r.Window = "gcra", "500ms" },
		func(r *Rule) { r.Algo, r.Limit = "log", 10000 },
		func(r *Rule) { r.Window, r.Shadow = "86400", true },
	} {
		r := good()
		mod(&r)
		if err := r.Validate(10000); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	tests := []struct {
		mod    func(*Rule)
		field  string
		reason error
	}{
		{func(r *Rule) { r.ID = "" }, "id", ErrID},
		{func(r *Rule) { r.ID = "a:b" }, "id", ErrID},
		{func(r *Rule) { r.ID = strings.Repeat("x", 65) }, "id", ErrID},
		{func(r *Rule) { r.Target = "" }, "target", ErrTarget},
		{func(r *Rule) { r.Target = "/a*/b" }, "target", ErrTarget},
		{func(r *Rule) { r.Target = "/a b" }, "target", ErrTarget},
		{func(r *Rule) { r.Tier = "" }, "tier", ErrTier},
		{func(r *Rule) { r.Tier = "fr*" }, "tier", ErrTier},
		{func(r *Rule) { r.KeyType = "" }, "key_type", ErrKeyType},
		{func(r *Rule) { r.KeyType = "a=b" }, "key_type", ErrKeyType},
		{func(r *Rule) { r.Algo = "bucket" }, "algo", ErrAlgo},
		{func(r *Rule) { r.Limit = 0 }, "limit", ErrLimit},
		{func(r *Rule) { r.Limit = -5 }, "limit", ErrLimit},
		{func(r *Rule) { r.Limit = 1<<48 + 1 }, "limit", ErrLimit},
		{func(r *Rule) { r.Algo, r.Limit = "log", 10001 }, "limit", ErrLimit},
		{func(r *Rule) { r.Window = "" }, "window", ErrWindow},
		{func(r *Rule) { r.Window = "1.5s" }, "window", ErrWindow},
		{func(r *Rule) { r.Window = "367d" }, "window", ErrWindow},
		{func(r *Rule) { r.Burst = 5 }, "burst", ErrBurst}, // sliding has no burst
		{func(r *Rule) { r.Algo, r.Burst = "token", -1 }, "burst", ErrBurst},
		{func(r *Rule) { r.Algo, r.Limit, r.Window, r.Burst = "token", 1, "366d", 1000 }, "burst", ErrBurst},
		{func(r *Rule) { r.Algo, r.Limit, r.Window = "gcra", 1<<40, "1ms" }, "limit", ErrLimit},
	}
	for _, tt := range tests {
		r := good()
		tt.mod(&r)
		err := r.Validate(10000)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%+v: got %v, want a *ValidationError", r, err)
			continue
		}
		if ve.Field != tt.field || !errors.Is(err, tt.reason) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got field %q, error %v; want field %q, %v", r, ve.Field, err, tt.field, tt.reason)
		}
		if !strings.Contains(err.Error(), tt.field+": ") {
			t.Errorf("message %q does not name the field %q", err, tt.field)
		}
	}
}

func TestCompileNormalisesAlgo(t *testing.T) {
	r := good()
	r.Algo = "SLIDING"
	c, err := Compile(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rule.Algo != "sliding" || c.Params.Window != 60e9 || c.Params.Limit != 100 {
		t.Fatalf("got %+v", c)
	}
}

func TestMatchTargetAndTier(t *testing.T) {
	tests := []struct {
		target, tier string
		reqTarget    string
		reqTier      string
		want         bool
	}{
		{"/users/*", "free", "/users/42", "free", true},
		{"/users/*", "free", "/users/", "free", true},
		{"/users/*", "free", "/users", "free", false},
		{"/users/*", "free", "/usersx", "free", false},
		{"/users/*", "free", "/users/42", "pro", false},
		{"/users/*", "*", "/users/42", "pro", true},
		{"/login", "*", "/login", "x", true},
		{"/login", "*", "/login/", "x", true}, // one trailing slash apart
		{"/login/", "*", "/login", "x", true},
		{"/login", "*", "/login//", "x", false},
		{"/login", "*", "/logins", "x", false},
		{"/login", "*", "/login", "x", true},
		{"/", "*", "", "x", false},
		{"/", "*", "/", "x", true},
		{"*", "*", "/anything", "", true},
		{"/a*", "free", "/abc", "free", true},
	}
	for _, tt := range tests {
		r := good()
		r.Target, r.Tier = tt.target, tt.tier
		c, err := Compile(r, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := c.MatchTarget([]byte(tt.reqTarget)) && c.MatchTier([]byte(tt.reqTier))
		if got != tt.want {
			t.Errorf("rule %s/%s vs %s/%s: got %v", tt.target, tt.tier, tt.reqTarget, tt.reqTier, got)
		}
	}
}
