package script

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestRedisLogGoesToTheLogger(t *testing.T) {
	var buf bytes.Buffer
	e := New(Config{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer e.Close()
	body := "redis.log(redis.LOG_WARNING, 'hello', 1, nil, 'x')\nredis.log(redis.LOG_DEBUG, 'quiet')\nreturn 1"
	if r := e.Eval(Request{Body: []byte(body)}, newMemCaller()); replyText(r) != ":1" {
		t.Fatalf("run answered %q", replyText(r))
	}
	out := buf.String()
	for _, want := range []string{`level=WARN msg="hello 1 x" script=` + SHA([]byte(body)), `level=DEBUG msg=quiet`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
