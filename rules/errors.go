package rules

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every validation failure is a *ValidationError that
// wraps ErrInvalid and the sentinel of its field, so callers can test
// errors.Is(err, ErrInvalid) for "the client sent a bad rule" and
// errors.Is(err, ErrLimit) for the precise reason.
var (
	ErrInvalid  = errors.New("invalid rule")
	ErrExists   = errors.New("rule already exists")
	ErrNotFound = errors.New("no such rule")

	ErrID      = errors.New("must be 1 to 64 letters, digits, '-', '_' or '.'")
	ErrTarget  = errors.New("must be an exact path, a prefix ending in '*' (like /users/*), or '*'; no spaces, at most 1024 bytes")
	ErrTier    = errors.New("must be a tier name (1 to 64 letters, digits, '-', '_' or '.') or '*'")
	ErrKeyType = errors.New("must be a key type such as user, ip or apikey (1 to 64 letters, digits, '-', '_' or '.')")
	ErrAlgo    = errors.New("must be one of fixed, sliding, log, token, leaky, gcra")
	ErrLimit   = errors.New("must be a positive integer no larger than 2^48")
	ErrWindow  = errors.New(`must be a duration such as "500ms", "60" (seconds), "1m", "24h" or "1d", from 1ms to 366d`)
	ErrBurst   = errors.New("must be a non-negative integer no larger than 2^48, and is for token, leaky and gcra only")
	ErrType    = errors.New("has the wrong type")
	ErrUnknown = errors.New("is not a rule field (fields are id, target, tier, key_type, algo, limit, window, burst, shadow, block; block's are after, within, for)")
	ErrTwice   = errors.New("is given twice")
	ErrSyntax  = errors.New("is not valid JSON")

	// ErrEmptyFile is LoadYAML's error for a document that holds no list
	// at all (empty, or comments only): `[]` is how a file says "no rules".
	ErrEmptyFile = errors.New("the file holds no list of rules: it is empty or only comments (write [] for a file with no rules)")
)

// ValidationError says which field of which rule is wrong and why.
type ValidationError struct {
	ID     string // the rule's id, if known
	Field  string // the JSON field name ("limit"), or "" for the whole document
	Err    error  // the field's sentinel, such as ErrLimit
	Detail string // what was given or what else went wrong, may be ""
}

// Error returns a message naming the rule, the field and the reason, such
// as `invalid rule "free": limit: must be a positive integer ... (got -1)`.
func (e *ValidationError) Error() string {
	msg := ErrInvalid.Error()
	if e.ID != "" {
		msg += fmt.Sprintf(" %q", e.ID)
	}
	msg += ": "
	if e.Field != "" {
		msg += e.Field + ": "
	}
	if e.Err == ErrSyntax && e.Detail != "" {
		return msg + e.Detail // "malformed JSON at offset 7: ..."
	}
	msg += e.Err.Error()
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Unwrap makes errors.Is match both ErrInvalid and the field's sentinel.
func (e *ValidationError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

func invalid(id, field string, err error, detail string) *ValidationError {
	return &ValidationError{ID: id, Field: field, Err: err, Detail: detail}
}
