package rules

import "sort"

// Set is an immutable collection of compiled rules sorted by id. The zero
// Set and a nil *Set are empty. Methods that change the collection return
// a new Set and leave the receiver as it was, so readers may use a Set
// without locks while a writer builds the next one.
type Set struct {
	list []*Compiled // sorted by Rule.ID
}

// NewSet returns a Set of the given rules. Ids must be distinct.
func NewSet(rules ...*Compiled) *Set {
	list := append([]*Compiled(nil), rules...)
	sort.Slice(list, func(i, j int) bool { return list[i].Rule.ID < list[j].Rule.ID })
	return &Set{list: list}
}

// Len returns the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}

// All returns the rules in id order. The slice is shared: do not modify it.
func (s *Set) All() []*Compiled {
	if s == nil {
		return nil
	}
	return s.list
}

func (s *Set) find(id string) (int, bool) {
	i := sort.Search(s.Len(), func(i int) bool { return s.list[i].Rule.ID >= id })
	return i, i < s.Len() && s.list[i].Rule.ID == id
}

// Get returns the rule with the given id, or nil.
func (s *Set) Get(id string) *Compiled {
	if i, ok := s.find(id); ok {
		return s.list[i]
	}
	return nil
}

// With returns a Set in which c replaces the rule of the same id, or is
// added, and whether it was added.
func (s *Set) With(c *Compiled) (*Set, bool) {
	i, ok := s.find(c.Rule.ID)
	list := make([]*Compiled, 0, s.Len()+1)
	list = append(list, s.All()[:i]...)
	list = append(list, c)
	if ok {
		i++
	}
	list = append(list, s.All()[i:]...)
	return &Set{list: list}, !ok
}

// Without returns a Set without the rule of the given id, and whether the
// receiver held it.
func (s *Set) Without(id string) (*Set, bool) {
	i, ok := s.find(id)
	if !ok {
		return s, false
	}
	list := make([]*Compiled, 0, s.Len()-1)
	list = append(list, s.list[:i]...)
	list = append(list, s.list[i+1:]...)
	return &Set{list: list}, true
}

// Match fills q.Evals with the rules that apply to q, in id order: those
// whose target and tier match q.Target and q.Tier and whose key type is
// among q.IDs, each with its counter key "id:value". It does not allocate
// once q's buffers have grown to size.
func (s *Set) Match(q *Query) {
	q.Evals = q.Evals[:0]
	q.keys = q.keys[:0]
	for _, c := range s.All() {
		if !c.MatchTarget(q.Target) || !c.MatchTier(q.Tier) {
			continue
		}
		v, ok := q.value(c.Rule.KeyType)
		if !ok {
			continue
		}
		q.keys = append(q.keys, c.Rule.ID...)
		q.keys = append(q.keys, ':')
		q.keys = append(q.keys, v...)
		q.Evals = append(q.Evals, Eval{Rule: c})
	}
	off := 0
	for i := range q.Evals {
		e := &q.Evals[i]
		n := len(e.Rule.Rule.ID) + 1
		v, _ := q.value(e.Rule.Rule.KeyType)
		n += len(v)
		e.Key = q.keys[off : off+n : off+n]
		off += n
	}
}
