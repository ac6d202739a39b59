package rules

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeJSON(t *testing.T) {
	r, err := DecodeJSON([]byte(`{"id":"a","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":5,"window":"1s","shadow":true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Rule{ID: "a", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: "1s", Shadow: true}
	if r != want {
		t.Fatalf("got %+v", r)
	}
	back, err := DecodeJSON(EncodeJSON(r))
	if err != nil || back != r {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestDecodeJSONErrorsNameTheField(t *testing.T) {
	tests := []struct {
		in, field string
		reason    error
		contains  string
	}{
		{`{"id":"a","limt":5}`, "limt", ErrUnknown, "limt: is not a rule field"},
		{`{"id":"a","limit":"5"}`, "limit", ErrType, "want an integer, got string"},
		{`{"id":"a","limit":1.5}`, "limit", ErrType, "want an integer"},
		{`{"id":"a","window":60}`, "window", ErrType, "want a string, got number"},
		{`{"id":"a","shadow":"yes"}`, "shadow", ErrType, "want true or false"},
		{`{"id":"a","limit":5,"limit":500}`, "limit", ErrTwice, "limit: is given twice"},
		{`{"id":"a","limit":5,"LIMIT":500}`, "LIMIT", ErrTwice, "LIMIT: is given twice"},
		{`{"id":"a",`, "", ErrSyntax, "unexpected end"},
		{`{"id":"a"} {}`, "", ErrSyntax, "after the object"},
		{`[1]`, "", ErrSyntax, "want a JSON object"},
		{``, "", ErrSyntax, "empty"},
		{`{"id":}`, "", ErrSyntax, "offset"},
	}
	for _, tt := range tests {
		_, err := DecodeJSON([]byte(tt.in))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field || !errors.Is(err, tt.reason) ||
			!strings.Contains(err.Error(), tt.contains) {
			t.Errorf("%s: got %v (%+v), want field %q reason %v containing %q", tt.in, err, ve, tt.field, tt.reason, tt.contains)
		}
	}
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"id":"a","target":"/u/*","tier":"*","key_type":"ip","algo":"token","limit":5,"window":"1s","burst":9}`))
	f.Add([]byte(`{"id":"a","limit":-1}`))
	f.Add([]byte(`{"window":"1m","shadow":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeJSON(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		c, err := Compile(r, 0)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		back, err := DecodeJSON(EncodeJSON(c.Rule))
		if err != nil || back != c.Rule {
			t.Fatalf("round trip of %+v: %+v, %v", c.Rule, back, err)
		}
	})
}

// FuzzRuleJSON: whatever the input, DecodeJSON does not panic; it fails
// with a *ValidationError naming the reason, or it decodes a rule that
// encodes back to JSON decoding to the same rule, whose validation does
// not panic either. Its corpus (testdata/fuzz/FuzzRuleJSON) holds the
// documents of issue 10: keys given twice, in other cases, escaped.
func FuzzRuleJSON(f *testing.F) {
	f.Add([]byte(`{"id":"a","target":"*","tier":"*","key_type":"ip","algo":"gcra","limit":5,"window":"1m","burst":10}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeJSON(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v is not a *ValidationError", data, err)
			}
			return
		}
		back, err := DecodeJSON(EncodeJSON(r))
		if err != nil || back != r {
			t.Fatalf("%q: decoded %+v, which round-trips to %+v, %v", data, r, back, err)
		}
		if err := r.Validate(10000); err == nil {
			if _, err := Compile(r, 10000); err != nil {
				t.Fatalf("%q: valid, but Compile fails: %v", data, err)
			}
		}
	})
}

// TestDecodeStored: what EncodeJSON writes decodes back as it was, with
// or without a block; a record that is not JSON is ErrSyntax.
func TestDecodeStored(t *testing.T) {
	for _, r := range []Rule{
		{ID: "a", Target: "/x", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 5, Window: "1m"},
		{ID: "b", Target: "*", Tier: "free", KeyType: "user", Algo: "token", Limit: 5, Window: "1s", Burst: 9, Shadow: true,
			Block: &BlockSpec{After: 3, Within: "1m", For: "15m"}},
	} {
		got, err := DecodeStored(EncodeJSON(r))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("%s: %+v, %v", r.ID, got, err)
		}
	}
	if _, err := DecodeStored([]byte(`{"id":`)); !errors.Is(err, ErrSyntax) {
		t.Errorf("a cut record: %v, want ErrSyntax", err)
	}
}
