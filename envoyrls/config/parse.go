package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/engine"
	"gopkg.in/yaml.v3"
)

// Options bound what a configuration may hold.
type Options struct {
	// MaxLogLimit caps requests_per_unit for the log algorithm (the
	// server's --max-log-limit); 0 is engine.DefaultMaxLogLimit.
	MaxLogLimit int64
	// MaxBytes bounds what Load reads: a file, or a directory's files
	// together (the server's --max-config-bytes); 0 is DefaultMaxBytes.
	MaxBytes int64
}

// DefaultMaxBytes is Options.MaxBytes's default: 4 MiB.
const DefaultMaxBytes = 4 << 20

// readWait bounds how long Load waits for a file to end (a FIFO whose
// writer never closes it).
const readWait = 5 * time.Second

// parser reads one file into a Config.
type parser struct {
	file string
	opt  Options
	cfg  *Config
}

// fail is the panic value parse functions raise, recovered by Parse.
type fail struct{ err *Error }

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	panic(fail{&Error{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}})
}

// Parse reads one file's content, named file in errors, and adds its
// domain to cfg (an error if cfg already has it). On error cfg is left
// as it was.
func Parse(cfg *Config, file string, data []byte, opt Options) (err error) {
	if opt.MaxLogLimit <= 0 {
		opt.MaxLogLimit = engine.DefaultMaxLogLimit
	}
	p := &parser{file: file, opt: opt, cfg: cfg}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fail)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return &Error{File: file, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		p.errorf(&doc, "", "the file is empty: want a mapping with domain and descriptors")
	}
	root := doc.Content[0]
	p.wantKind(root, "", yaml.MappingNode, "a mapping with domain and descriptors")
	domain := &Descriptor{children: map[string]*Descriptor{}}
	var name string
	var descs *yaml.Node
	p.fields(root, "", func(key string, k, v *yaml.Node) {
		switch key {
		case "domain":
			name = p.str(v, "domain")
		case "descriptors":
			descs = v
		default:
			p.unknown(k, "", key, "domain, descriptors")
		}
	})
	if name == "" {
		p.errorf(root, "domain", "config file cannot have empty domain")
	}
	if _, dup := cfg.domains[name]; dup {
		p.errorf(root, "domain", "duplicate domain '%s' in config file", name)
	}
	if descs != nil {
		p.descriptors(domain, descs, "descriptors", "")
	}
	cfg.domains[name] = domain
	return nil
}

// fields calls f for each key of mapping n, in order, refusing keys that
// are not strings. A key given twice counts once, with its last value, as
// envoyproxy/ratelimit's YAML reader (yaml.v2 into a struct) takes it.
func (p *parser) fields(n *yaml.Node, field string, f func(key string, k, v *yaml.Node)) {
	last := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			p.errorf(k, field, "config error, key is not of type string: %v", k.Value)
		}
		last[k.Value] = i
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if last[k.Value] == i {
			f(k.Value, k, v)
		}
	}
}

func (p *parser) unknown(k *yaml.Node, field, key, want string) {
	p.errorf(k, join(field, key), "config error, unknown key '%s' (want %s)", key, want)
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func (p *parser) wantKind(n *yaml.Node, field string, kind yaml.Kind, want string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != kind {
		p.errorf(n, field, "want %s", want)
	}
}

// str returns a scalar's text: numbers and booleans are read as written,
// as envoyproxy/ratelimit reads them into strings; null is "".
func (p *parser) str(n *yaml.Node, field string) string {
	p.wantKind(n, field, yaml.ScalarNode, "a string")
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

// yaml11Bools are the booleans of YAML 1.1, as envoyproxy/ratelimit's
// YAML reader (yaml.v2) resolves plain scalars.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"true": true, "True": true, "TRUE": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
	"false": false, "False": false, "FALSE": false,
}

// boolean reads true or false as the reference does: YAML 1.1's plain
// yes, no, on, off, y, n too.
func (p *parser) boolean(n *yaml.Node, field string) bool {
	p.wantKind(n, field, yaml.ScalarNode, "true or false")
	b, ok := yaml11Bools[n.Value]
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || !ok {
		p.errorf(n, field, "want true or false, got %q", n.Value)
	}
	return b
}

// integer reads a non-negative integer no larger than max, as the
// reference reads a plain scalar (YAML 1.1, yaml.v2): underscores are
// dropped, 0x is hexadecimal, 0b binary, 0o and a leading 0 octal (010 is
// 8). A number the reference would read otherwise (a float such as 1e3,
// or base 60 such as 1:30) is refused, with its reading named.
func (p *parser) integer(n *yaml.Node, field string, max int64) int64 {
	p.wantKind(n, field, yaml.ScalarNode, "an integer")
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		p.errorf(n, field, "want an integer from 0 to %d, got the string %q", max, n.Value)
	}
	v, err := yaml11Int(n.Value)
	if err != nil || v < 0 || v > max {
		p.errorf(n, field, "want an integer from 0 to %d, got %q%s", max, n.Value, yaml11Note(n.Value))
	}
	return v
}

// yaml11Int reads s as YAML 1.1 reads a plain integer (and Go's
// strconv.ParseInt with base 0 does, once the underscores are gone).
func yaml11Int(s string) (int64, error) {
	t := strings.ReplaceAll(s, "_", "")
	if t == "" || strings.HasPrefix(t, "+") && len(t) > 1 && t[1] == '-' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(t, 0, 64)
}

// yaml11Note says how envoyproxy/ratelimit reads a number this parser
// refuses, when it reads one: "" otherwise.
func yaml11Note(s string) string {
	if _, err := yaml11Int(s); err == nil {
		return ""
	}
	if f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil {
		return fmt.Sprintf(" (envoyproxy/ratelimit reads it as the float %v; write the integer it means)", f)
	}
	if strings.Contains(s, ":") {
		return " (YAML 1.1 reads it in base 60; write the integer it means)"
	}
	return ""
}

// descriptors loads the sequence n into parent's children. path is the
// parent's metrics path ("" for the domain).
func (p *parser) descriptors(parent *Descriptor, n *yaml.Node, field, path string) {
	if n.Tag == "!!null" {
		return
	}
	p.wantKind(n, field, yaml.SequenceNode, "a list of descriptors")
	for i, dn := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		d, sub := p.descriptor(dn, f)
		final := d.Key
		if d.Value != "" {
			final += "_" + d.Value
		}
		d.path = final
		if path != "" {
			d.path = path + "." + final
		}
		if _, dup := parent.children[final]; dup {
			p.errorf(dn, f, "duplicate descriptor composite key '%s' (use rate_limits for several limits on one descriptor)", d.path)
		}
		if d.ShareThreshold && !strings.Contains(final, "*") {
			p.errorf(dn, f+".share_threshold", "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", final)
		}
		if strings.Contains(final, "*") {
			parent.wildcards = append(parent.wildcards, wildcard{key: final, parts: strings.Split(final, "*")})
		}
		parent.children[final] = d
		if sub != nil {
			p.descriptors(d, sub, f+".descriptors", d.path)
		}
	}
}

// descriptor reads one descriptor; it returns its descriptors' node, which
// the caller loads once it knows the descriptor's path.
func (p *parser) descriptor(n *yaml.Node, field string) (*Descriptor, *yaml.Node) {
	p.wantKind(n, field, yaml.MappingNode, "a descriptor: a mapping with key, value, rate_limit, descriptors")
	d := &Descriptor{}
	var rl, rls, sub *yaml.Node
	p.fields(n, field, func(key string, k, v *yaml.Node) {
		f := join(field, key)
		switch key {
		case "key":
			d.Key = p.str(v, f)
		case "value":
			d.Value = p.str(v, f)
		case "rate_limit":
			rl = v
		case "rate_limits":
			rls = v
		case "descriptors":
			sub = v
		case "shadow_mode":
			d.ShadowMode = p.boolean(v, f)
		case "detailed_metric":
			d.DetailedMetric = p.boolean(v, f)
		case "value_to_metric":
			d.ValueToMetric = p.boolean(v, f)
		case "share_threshold":
			d.ShareThreshold = p.boolean(v, f)
		case "quota_mode":
			if p.boolean(v, f) {
				p.errorf(v, f, "quota_mode is not supported by rlserver")
			}
		case "metadata": // accepted and ignored (response dynamic metadata is not supported)
		default:
			p.unknown(k, field, key, "key, value, rate_limit, rate_limits, descriptors, shadow_mode, detailed_metric, value_to_metric, share_threshold")
		}
	})
	if d.Key == "" {
		p.errorf(n, join(field, "key"), "descriptor has empty key")
	}
	if rl != nil && rl.Tag != "!!null" {
		d.Limits = append(d.Limits, p.limit(rl, join(field, "rate_limit"), 0))
	}
	if rls != nil && rls.Tag != "!!null" {
		p.wantKind(rls, join(field, "rate_limits"), yaml.SequenceNode, "a list of rate limits")
		for i, ln := range rls.Content {
			d.Limits = append(d.Limits, p.limit(ln, fmt.Sprintf("%s.rate_limits[%d]", field, i), len(d.Limits)))
		}
	}
	d.children = map[string]*Descriptor{}
	return d, sub
}

// limit reads one rate_limit mapping.
func (p *parser) limit(n *yaml.Node, field string, index int) *Limit {
	p.wantKind(n, field, yaml.MappingNode, "a rate limit: a mapping with unit and requests_per_unit")
	l := &Limit{Index: index, UnitMultiplier: 1, Algo: engine.Fixed}
	var unitNode, algoNode, multNode, burstNode *yaml.Node
	unit := ""
	p.fields(n, field, func(key string, k, v *yaml.Node) {
		f := join(field, key)
		switch key {
		case "unit":
			unit, unitNode = p.str(v, f), v
		case "requests_per_unit":
			l.RequestsPerUnit = p.integer(v, f, math.MaxUint32)
		case "unlimited":
			l.Unlimited = p.boolean(v, f)
		case "name":
			l.Name = p.str(v, f)
		case "replaces":
			l.Replaces = p.replaces(v, f)
		case "algorithm":
			algo, ok := engine.ParseAlgo([]byte(p.str(v, f)))
			if !ok {
				p.errorf(v, f, "want fixed, sliding, log, token, leaky or gcra, got %q", v.Value)
			}
			l.Algo, algoNode = algo, v
		case "unit_multiplier":
			l.UnitMultiplier, multNode = p.integer(v, f, math.MaxUint32), v
		case "burst":
			l.Burst, burstNode = p.integer(v, f, engine.MaxLimit), v
		default:
			p.unknown(k, field, key, "unit, requests_per_unit, unlimited, name, replaces, algorithm, unit_multiplier, burst")
		}
	})
	u, valid := ParseUnit(unit)
	switch {
	case l.Unlimited && valid:
		p.errorf(unitNode, join(field, "unit"), "should not specify rate limit unit when unlimited")
	case !l.Unlimited && !valid:
		at := unitNode
		if at == nil {
			at = n
		}
		p.errorf(at, join(field, "unit"), "invalid rate limit unit '%s' (want second, minute, hour, day, week, month or year)", unit)
	}
	l.Unit = u
	for _, r := range l.Replaces {
		if r == l.Name {
			p.errorf(n, join(field, "replaces"), "replaces should not contain name of same descriptor")
		}
	}
	p.checkParams(l, n, field, algoNode, multNode, burstNode)
	return l
}

// checkParams validates the limit's window and engine parameters.
func (p *parser) checkParams(l *Limit, n *yaml.Node, field string, algoNode, multNode, burstNode *yaml.Node) {
	if l.Unlimited {
		return
	}
	if l.UnitMultiplier < 1 || l.Unit.Seconds()*l.UnitMultiplier*1e9 > engine.MaxWindow {
		p.errorf(orNode(multNode, n), join(field, "unit_multiplier"),
			"want a window of 1 to 366 days or less: %d × %s is not", l.UnitMultiplier, l.Unit)
	}
	if l.Burst != 0 && !l.Algo.Bucket() {
		p.errorf(orNode(burstNode, n), join(field, "burst"), "burst applies to token, leaky and gcra, not %s", l.Algo)
	}
	if l.RequestsPerUnit == 0 {
		return // every request is over the limit; no counter
	}
	if l.Algo == engine.Log && l.RequestsPerUnit > p.opt.MaxLogLimit {
		p.errorf(orNode(algoNode, n), join(field, "requests_per_unit"),
			"%d is above the maximum for the log algorithm, %d (--max-log-limit): log keeps one entry per request",
			l.RequestsPerUnit, p.opt.MaxLogLimit)
	}
	if err := l.Params().Validate(l.Algo); err != nil {
		p.errorf(n, field, "%v", err)
	}
}

func orNode(n, fallback *yaml.Node) *yaml.Node {
	if n != nil {
		return n
	}
	return fallback
}

// replaces reads a list of {name: ...}.
func (p *parser) replaces(n *yaml.Node, field string) []string {
	if n.Tag == "!!null" {
		return nil
	}
	p.wantKind(n, field, yaml.SequenceNode, "a list of {name: ...}")
	var out []string
	for i, e := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		p.wantKind(e, f, yaml.MappingNode, "a mapping {name: ...}")
		name := ""
		p.fields(e, f, func(key string, k, v *yaml.Node) {
			if key != "name" {
				p.unknown(k, f, key, "name")
			}
			name = p.str(v, join(f, key))
		})
		if name == "" {
			p.errorf(e, f, "should not have an empty replaces entry")
		}
		out = append(out, name)
	}
	return out
}
