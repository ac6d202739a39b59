package rules

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadYAML decodes and validates a YAML list of rules, such as the file
// given with --rules:
//
//   - id: free-users
//     target: /users/*
//     tier: free
//     key_type: user
//     algo: sliding
//     limit: 100
//     window: 1m
//
// Errors name the rule by position (1-based), line and id, and the field:
// `rule 2 (line 9, id "free-users"): invalid rule "free-users": limit: ...`.
// Unknown fields, wrong types and duplicate ids are errors. maxLogLimit is
// as for Validate.
//
// A document with no list at all — empty, blanks and comments only, or a
// bare null — is ErrEmptyFile, not "no rules": a file caught half-written
// (truncated, then written) must not read as the removal of every rule.
// The empty list `[]` is a file that means no rules.
func LoadYAML(data []byte, maxLogLimit int64) ([]Rule, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		return nil, ErrEmptyFile
	}
	list := doc.Content[0]
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: want a list of rules (each item starting with '- id: ...')", list.Line)
	}
	out := make([]Rule, 0, len(list.Content))
	seen := make(map[string]int)
	for i, item := range list.Content {
		r, err := decodeYAMLRule(item)
		if err == nil {
			err = r.Validate(maxLogLimit)
		}
		if err == nil && seen[r.ID] > 0 {
			err = fmt.Errorf("%w: id %q is also rule %d", ErrExists, r.ID, seen[r.ID])
		}
		if err != nil {
			where := fmt.Sprintf("rule %d (line %d", i+1, item.Line)
			if r.ID != "" {
				where += fmt.Sprintf(", id %q", r.ID)
			}
			return nil, fmt.Errorf("%s): %w", where, err)
		}
		seen[r.ID] = i + 1
		out = append(out, r)
	}
	return out, nil
}

// decodeYAMLRule decodes one mapping field by field, so that an unknown
// field or a wrong type is reported with its name and line.
func decodeYAMLRule(n *yaml.Node) (Rule, error) {
	var r Rule
	if n.Kind != yaml.MappingNode {
		return r, invalid("", "", ErrSyntax, "want a mapping of rule fields")
	}
	fields := map[string]any{
		"id": &r.ID, "target": &r.Target, "tier": &r.Tier, "key_type": &r.KeyType, "algo": &r.Algo,
		"limit": &r.Limit, "window": &r.Window, "burst": &r.Burst, "shadow": &r.Shadow,
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "block" {
			b, err := decodeYAMLBlock(r.ID, v)
			if err != nil {
				return r, err
			}
			r.Block = b
			continue
		}
		ptr, ok := fields[k.Value]
		if !ok {
			return r, invalid(r.ID, k.Value, ErrUnknown, fmt.Sprintf("line %d", k.Line))
		}
		if v.Kind != yaml.ScalarNode {
			return r, invalid(r.ID, k.Value, ErrType, fmt.Sprintf("line %d: want a single value", v.Line))
		}
		if err := v.Decode(ptr); err != nil {
			return r, invalid(r.ID, k.Value, ErrType, fmt.Sprintf("line %d: want %s, got %q", v.Line, kindOf(ptr), v.Value))
		}
	}
	return r, nil
}

// decodeYAMLBlock decodes a rule's block: mapping (after, within, for).
func decodeYAMLBlock(id string, n *yaml.Node) (*BlockSpec, error) {
	if n.Kind != yaml.MappingNode {
		return nil, invalid(id, "block", ErrType, fmt.Sprintf("line %d: want a mapping of after, within and for", n.Line))
	}
	var b BlockSpec
	fields := map[string]any{"after": &b.After, "within": &b.Within, "for": &b.For}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ptr, ok := fields[k.Value]
		if !ok {
			return nil, invalid(id, "block."+k.Value, ErrUnknown, fmt.Sprintf("line %d", k.Line))
		}
		if v.Kind != yaml.ScalarNode || v.Decode(ptr) != nil {
			return nil, invalid(id, "block."+k.Value, ErrType, fmt.Sprintf("line %d: want %s, got %q", v.Line, kindOf(ptr), v.Value))
		}
	}
	return &b, nil
}

func kindOf(ptr any) string {
	switch ptr.(type) {
	case *int64:
		return "an integer"
	case *bool:
		return "true or false"
	}
	return "a string"
}
