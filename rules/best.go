package rules

// Best returns the index of the most restrictive of evals (as filled by
// Set.Match and evaluated), or -1 if evals is empty. "Most restrictive" is:
//
//  1. Only enforcing rules are considered, unless every rule is in shadow
//     mode; then the shadow rules are.
//  2. A denied result beats an allowed one. Among denied results the
//     longest RetryAfter wins, and -1 (the cost can never fit) is the
//     longest of all: the request cannot pass before every rule allows it.
//  3. Among allowed results the fewest Remaining wins: the rule that will
//     deny first.
//  4. Remaining ties go to the longer ResetAfter, then to the smaller rule
//     id, so the choice is deterministic.
//
// evals must be in id order, as Match leaves them.
func Best(evals []Eval) int {
	enforcing := false
	for i := range evals {
		if !evals[i].Rule.Rule.Shadow {
			enforcing = true
			break
		}
	}
	best := -1
	for i := range evals {
		if enforcing && evals[i].Rule.Rule.Shadow {
			continue
		}
		if best < 0 || moreRestrictive(&evals[i], &evals[best]) {
			best = i
		}
	}
	return best
}

// moreRestrictive reports whether a is strictly more restrictive than b;
// on a full tie the earlier one (smaller id) stays.
func moreRestrictive(a, b *Eval) bool {
	ra, rb := &a.Result, &b.Result
	if ra.Allowed != rb.Allowed {
		return !ra.Allowed
	}
	if !ra.Allowed && ra.RetryAfter != rb.RetryAfter {
		return longer(ra.RetryAfter, rb.RetryAfter)
	}
	if ra.Remaining != rb.Remaining {
		return ra.Remaining < rb.Remaining
	}
	return ra.ResetAfter > rb.ResetAfter
}

// longer compares retry times, -1 meaning never.
func longer(a, b int64) bool {
	switch {
	case a < 0:
		return b >= 0
	case b < 0:
		return false
	}
	return a > b
}
