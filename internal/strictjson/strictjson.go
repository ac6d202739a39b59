// Package strictjson decodes one JSON document into a struct, rejecting
// unknown fields, duplicate keys, wrong types and trailing data, with
// errors that name the offending field. rules and httpapi share it so that a bad request body
// and a bad rule read the same way.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Error is a decoding failure. Field is the JSON field name ("" when the
// document as a whole is wrong); Reason says what is wrong with it.
type Error struct {
	Field  string
	Reason string
	// Unknown is true when Field is not a field of the target struct.
	Unknown bool
	// Duplicate is true when Field appears twice in one object.
	Duplicate bool
}

// Error returns "field: reason", or the reason alone for the document.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Decode decodes exactly one JSON value from data into v, which must be a
// pointer to a struct. It returns an *Error for malformed JSON, a value
// that is not an object, unknown fields, a key given twice in one object
// (keys that differ only in case count as the same: encoding/json would
// give both to one field, the last one winning), wrong types and trailing
// data.
func Decode(data []byte, v any) error {
	if err := decode(data, v); err != nil {
		return err
	}
	if key, ok := duplicateKey(data); ok {
		return &Error{Field: key, Reason: "is given twice", Duplicate: true}
	}
	return nil
}

func decode(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Reason: "empty body: want a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: fmt.Sprintf("malformed JSON: unexpected data after the object at offset %d", dec.InputOffset())}
	}
	return nil
}

// duplicateKey returns the first key of data, a valid JSON document, that
// appears twice in one object, ignoring case.
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	// One frame per open object or array: an object's keys so far, and
	// whether its next string is a key.
	type frame struct {
		keys map[string]bool
		key  bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:top]
			if top > 0 && stack[top-1].keys != nil {
				stack[top-1].key = true
			}
			continue
		}
		if s, ok := tok.(string); ok && top >= 0 && stack[top].key {
			folded := strings.ToLower(s)
			if stack[top].keys[folded] {
				return s, true
			}
			stack[top].keys[folded], stack[top].key = true, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]bool{}, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		default: // a value in an object: a key comes next
			if top >= 0 && stack[top].keys != nil {
				stack[top].key = true
			}
		}
	}
}

func describe(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &Error{Reason: fmt.Sprintf("malformed JSON at offset %d: %s", syn.Offset, syn.Error())}
	case errors.As(err, &typ):
		if typ.Field == "" {
			return &Error{Reason: "want a JSON object, got " + typ.Value}
		}
		return &Error{Field: typ.Field, Reason: "want " + describeType(typ.Type) + ", got " + typ.Value}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Reason: "malformed JSON: unexpected end of input"}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
		return &Error{Field: name, Reason: "unknown field", Unknown: true}
	}
	return &Error{Reason: "malformed JSON: " + err.Error()}
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return t.String()
}
