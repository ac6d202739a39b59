package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/shards"
)

// TestLogFormatsReadTheSame: the same records logged with --log-format
// text and --log-format json give every field the same reading: a
// duration is "23ms" in both, the consistency "strong" in both, an error
// its message, a group's fields under the group's name.
func TestLogFormatsReadTheSame(t *testing.T) {
	parallel(t)
	emit := func(format string) string {
		var b bytes.Buffer
		log := newLogger(Config{LogLevel: "debug", LogFormat: format}, &b)
		log.Info("state loaded", "keys", 3, "consistency", cluster.Strong, "took", 23*time.Millisecond)
		log.Warn("slow", "consistency", cluster.Fast, "flush", 1500*time.Microsecond, "algo", engine.GCRA,
			"policy", shards.VolatileTTL, "err", errors.New("disk full"), "addr", netip.MustParseAddrPort("127.0.0.1:6380"),
			"ok", true, "ratio", 0.25, "note", "two words")
		log.With("group", 7).WithGroup("raft").Debug("heartbeat", "after", 2*time.Second, "term", uint64(9))
		return b.String()
	}
	text := strings.Split(strings.TrimSpace(emit("text")), "\n")
	js := strings.Split(strings.TrimSpace(emit("json")), "\n")
	if len(text) != 3 || len(js) != 3 {
		t.Fatalf("lines: text %d, json %d", len(text), len(js))
	}
	for i := range text {
		tf := parseLogfmt(t, text[i])
		var m map[string]any
		if err := json.Unmarshal([]byte(js[i]), &m); err != nil {
			t.Fatalf("json line %q: %v", js[i], err)
		}
		jf := map[string]string{}
		flattenJSON("", m, jf)
		for _, k := range []string{"time"} {
			tt, err1 := time.Parse(time.RFC3339, tf[k])
			jt, err2 := time.Parse(time.RFC3339, jf[k])
			if err1 != nil || err2 != nil || tt.Sub(jt).Abs() > time.Second {
				t.Fatalf("line %d: time %q (text) vs %q (json)", i, tf[k], jf[k])
			}
			delete(tf, k)
			delete(jf, k)
		}
		if fmt.Sprint(tf) != fmt.Sprint(jf) {
			t.Errorf("line %d reads differently:\ntext %v\njson %v", i, tf, jf)
		}
	}
	// The figures a person reads, by name.
	var first map[string]any
	json.Unmarshal([]byte(js[0]), &first)
	if first["consistency"] != "strong" || first["took"] != "23ms" {
		t.Fatalf("json: consistency %v, took %v; want strong, 23ms", first["consistency"], first["took"])
	}
}

// parseLogfmt reads one line of slog's text handler into its fields.
func parseLogfmt(t *testing.T, line string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rest := line; rest != ""; {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			t.Fatalf("logfmt %q: no = in %q", line, rest)
		}
		key := rest[:eq]
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("logfmt %q: %v", line, err)
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			sp := strings.IndexByte(rest, ' ')
			if sp < 0 {
				sp = len(rest)
			}
			val, rest = rest[:sp], rest[sp:]
		}
		out[key] = val
		rest = strings.TrimPrefix(rest, " ")
	}
	return out
}

// flattenJSON writes m's leaves into out as the text handler names and
// prints them: a group's fields as group.field, numbers as Go prints them.
func flattenJSON(prefix string, m map[string]any, out map[string]string) {
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			flattenJSON(prefix+k+".", v, out)
		case float64:
			out[prefix+k] = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			out[prefix+k] = fmt.Sprint(v)
		}
	}
}
