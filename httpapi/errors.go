package httpapi

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/rlserver/rlserver/internal/strictjson"
	"github.com/rlserver/rlserver/rules"
)

// Errors of the HTTP layer itself. writeError maps them, the rules
// sentinels and Redis-style errors from the state to a status.
var (
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("missing or wrong bearer token")
	ErrTooLarge     = errors.New("request body is larger than 1 MiB")
	ErrMediaType    = errors.New(`request body must be JSON, sent with "Content-Type: application/json"`)
)

// errorBody is the JSON of every error response: {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

// badRequest returns an ErrBadRequest naming the field.
func badRequest(field, reason string) error {
	if field == "" {
		return fmt.Errorf("%w: %s", ErrBadRequest, reason)
	}
	return fmt.Errorf("%w: %s: %s", ErrBadRequest, field, reason)
}

// writeError is the one place where errors become HTTP statuses.
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, rules.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, ErrUnauthorized):
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer realm="rlserver"`)
	case errors.Is(err, rules.ErrNotFound), errors.Is(err, ErrNoBlock):
		status = http.StatusNotFound
	case errors.Is(err, rules.ErrExists), redisCode(err) == "WRONGTYPE":
		status = http.StatusConflict
	case errors.Is(err, ErrTooLarge):
		status = http.StatusRequestEntityTooLarge
	case redisCode(err) == "MISCONF":
		status = http.StatusServiceUnavailable // the log refuses writes
	case errors.Is(err, ErrMediaType):
		status = http.StatusUnsupportedMediaType
	case redisCode(err) == "OOM": // a new key, and --maxmemory reached
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, errorBody{err.Error()})
}

// redisCode returns the upper-case first word of a Redis-style error from
// the state ("WRONGTYPE ..."), or "".
func redisCode(err error) string {
	word, _, _ := strings.Cut(err.Error(), " ")
	if word != "" && strings.ToUpper(word) == word && strings.ToLower(word) != word {
		return word
	}
	return ""
}

// readBody reads at most 1 MiB of r's body, which must be declared JSON:
// a web page can send a form, text/plain or an untyped body to any site
// without asking, but not application/json, so refusing the others keeps
// pages that a user's browser opens from changing rules or charging
// limits. (An empty body is refused by the decoder.)
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.ContentLength != 0 && (err != nil || mt != "application/json") {
		return nil, fmt.Errorf("%w (got %q)", ErrMediaType, r.Header.Get("Content-Type"))
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, ErrTooLarge
	}
	if err != nil {
		return nil, badRequest("", "reading the body: "+err.Error())
	}
	return data, nil
}

// decode reads r's body as one strict JSON object into v.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := readBody(w, r)
	if err != nil {
		return err
	}
	if err := strictjson.Decode(data, v); err != nil {
		return badRequest("", err.Error())
	}
	return nil
}

// access is what an endpoint asks of a request's bearer token.
type access int

const (
	// accessCheck is for reading rules and checking: when a check token is
	// set (--requirepass), it or the admin token; else nothing.
	accessCheck access = iota
	// accessAdmin is for changing rules, removing nodes and reading the
	// cluster's state: the admin token when one is set; else the check
	// token when one is set, so that --requirepass alone still guards
	// them; else nothing.
	accessAdmin
	// accessMetrics is for GET /metrics with MetricsAuth: the check token
	// or the admin token, whichever are set; nothing if neither is.
	accessMetrics
)

// authorize checks r's bearer token against what need asks for. The
// admin token opens everything. An error is ErrUnauthorized with a text
// that names what was refused (what: "deleting a rule") and the token
// that would have opened it.
func (a *api) authorize(r *http.Request, need access, what string) error {
	adminSet, checkSet := a.cfg.AdminToken != "", a.cfg.CheckToken != ""
	tok, ok := bearer(r)
	switch {
	case adminSet && ok && equal(tok, a.cfg.AdminToken):
		return nil
	case need == accessAdmin && adminSet:
		return unauthorized(what, "the admin token", "<admin-token>")
	case !checkSet && (need != accessMetrics || !adminSet):
		return nil // no token is asked for
	case checkSet && ok && equal(tok, a.cfg.CheckToken):
		return nil
	case !checkSet: // accessMetrics, only the admin token set
		return unauthorized(what, "the admin token", "<admin-token>")
	case need == accessAdmin:
		return unauthorized(what, "the password (--requirepass, taken as the admin token since none is set)", "<requirepass>")
	case adminSet:
		return unauthorized(what, "the password (or the admin token)", "<requirepass>")
	}
	return unauthorized(what, "the password", "<requirepass>")
}

// unauthorized is the error of a refused request: what needs which token,
// sent as placeholder.
func unauthorized(what, which, placeholder string) error {
	return fmt.Errorf("%w: %s needs %s: send \"Authorization: Bearer %s\"", ErrUnauthorized, what, which, placeholder)
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func itoa(n int64) string { return fmt.Sprint(n) }

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return fmt.Sprintf("%q", s)
}
