package main

import (
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
)

// readableJSON is the JSON handler's ReplaceAttr: it writes a value the
// way the text handler does wherever the two would differ for a person
// reading them. A duration reads "23ms" (not 23000000 nanoseconds) and a
// value with a String method, such as the consistency, reads by its name
// ("strong", not 1). Values that say how they marshal to JSON or text keep
// saying so; numbers, booleans and strings are left alone.
func readableJSON(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		a.Value = slog.StringValue(a.Value.Duration().String())
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			// JSONHandler already writes an error's Error().
		case json.Marshaler, encoding.TextMarshaler:
		case fmt.Stringer:
			a.Value = slog.StringValue(v.String())
		}
	}
	return a
}
