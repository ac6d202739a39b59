package rules

import (
	"fmt"
	"sort"
)

// Change is a set of rule changes made as one, such as a --rules file's
// load: every rule of Set is stored, replacing the rule of its id, and
// every rule named in Delete is removed, so that a reader sees the rules
// as they were before or as they are after, never a part of the change.
// An id may be in Set once, and not in both Set and Delete.
type Change struct {
	Set    []Rule   `json:"set,omitempty"`
	Delete []string `json:"delete,omitempty"`
}

// ChangeResult counts what a Change did: rules added (a new id), replaced,
// and deleted (ids in Delete that were held).
type ChangeResult struct {
	Added, Replaced, Deleted int
}

// Compile validates ch (each rule with Compile, so without
// --max-log-limit, which the caller applies) and returns Set compiled, in
// Set's order. The error names the rule.
func (ch Change) Compile() ([]*Compiled, error) {
	out := make([]*Compiled, 0, len(ch.Set))
	seen := make(map[string]bool, len(ch.Set))
	for i, r := range ch.Set {
		c, err := Compile(r, 0)
		if err != nil {
			return nil, fmt.Errorf("rule %d of the change: %w", i+1, err)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("%w %q: the change sets it twice", ErrExists, r.ID)
		}
		seen[r.ID] = true
		out = append(out, c)
	}
	for _, id := range ch.Delete {
		if seen[id] {
			return nil, invalid(id, "", ErrTwice, "the change both sets and deletes it")
		}
	}
	return out, nil
}

// Apply returns a Set in which every rule of set replaces the rule of its
// id or is added, and the rules of the ids in del are removed, with what
// it did; s is unchanged. Ids of set must be distinct and not in del
// (Change.Compile checks that). It costs O((n + k) log(n + k)) for n rules
// held and k changed, whatever k: a change of many rules is one new Set,
// not one per rule.
func (s *Set) Apply(set []*Compiled, del []string) (*Set, ChangeResult) {
	var res ChangeResult
	put := make(map[string]*Compiled, len(set))
	for _, c := range set {
		put[c.Rule.ID] = c
	}
	gone := make(map[string]bool, len(del))
	for _, id := range del {
		gone[id] = true
	}
	list := make([]*Compiled, 0, s.Len()+len(set))
	held := make(map[string]bool, len(set))
	for _, c := range s.All() {
		id := c.Rule.ID
		switch n, ok := put[id]; {
		case ok:
			list = append(list, n)
			held[id] = true
			res.Replaced++
		case gone[id]:
			res.Deleted++
		default:
			list = append(list, c)
		}
	}
	for _, c := range set {
		if !held[c.Rule.ID] {
			list = append(list, c)
			res.Added++
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Rule.ID < list[j].Rule.ID })
	return &Set{list: list}, res
}
