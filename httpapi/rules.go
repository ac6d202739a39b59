package httpapi

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/rlserver/rlserver/rules"
)

// RuleStore is the rule table behind /rules. Implementations are safe for
// concurrent use; errors wrap the rules sentinels (ErrInvalid, ErrExists).
// A shards.Store satisfies it.
type RuleStore interface {
	Rule(id string) (rules.Rule, bool)
	Rules() []rules.Rule
	CreateRule(r rules.Rule) error
	SetRule(r rules.Rule) (added bool, err error)
	DeleteRule(id string) (existed bool, err error)
}

func (a *api) routeRules(mux *http.ServeMux) {
	a.handle(mux, "GET /rules", "rules_list", a.listRules)
	a.handle(mux, "POST /rules", "rules_create", a.createRule)
	mux.Handle("/rules", methodNotAllowed("GET, POST"))
	a.handle(mux, "GET /rules/{id}", "rules_get", a.getRule)
	a.handle(mux, "PUT /rules/{id}", "rules_put", a.putRule)
	a.handle(mux, "DELETE /rules/{id}", "rules_delete", a.deleteRule)
	mux.Handle("/rules/{id}", methodNotAllowed("GET, PUT, DELETE"))
}

// GET /rules: every rule, in id order.
func (a *api) listRules(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r, accessCheck, "reading rules"); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.cfg.Rules.Rules())
}

// GET /rules/{id}: the rule, or 404.
func (a *api) getRule(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r, accessCheck, "reading a rule"); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	rule, ok := a.cfg.Rules.Rule(id)
	if !ok {
		writeError(w, fmt.Errorf("%w: %q", rules.ErrNotFound, id))
		return
	}
	writeJSON(w, http.StatusOK, rule)
}

// POST /rules: create; 201, or 409 if the id is taken.
func (a *api) createRule(w http.ResponseWriter, r *http.Request) {
	rule, err := a.readRule(w, r, "")
	if err == nil {
		err = a.cfg.Rules.CreateRule(rule)
	}
	if err == nil {
		err = a.sync(r.Context(), true)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.cfg.Logger.Info("rule set", "id", rule.ID, "added", true, "client", r.RemoteAddr, "via", "http")
	w.Header().Set("Location", "/rules/"+url.PathEscape(rule.ID))
	writeJSON(w, http.StatusCreated, a.stored(rule))
}

// PUT /rules/{id}: create (201) or replace (200). The body's id must be
// empty or equal to the path's.
func (a *api) putRule(w http.ResponseWriter, r *http.Request) {
	rule, err := a.readRule(w, r, r.PathValue("id"))
	var added bool
	if err == nil {
		added, err = a.cfg.Rules.SetRule(rule)
	}
	if err == nil {
		err = a.sync(r.Context(), true)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.cfg.Logger.Info("rule set", "id", rule.ID, "added", added, "client", r.RemoteAddr, "via", "http")
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	writeJSON(w, status, a.stored(rule))
}

// DELETE /rules/{id}: 204, or 404 if absent.
func (a *api) deleteRule(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r, accessAdmin, "deleting a rule"); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	existed, err := a.cfg.Rules.DeleteRule(id)
	if err == nil && !existed {
		err = fmt.Errorf("%w: %q", rules.ErrNotFound, id)
	}
	if err == nil {
		err = a.sync(r.Context(), true)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.cfg.Logger.Info("rule deleted", "id", id, "client", r.RemoteAddr, "via", "http")
	w.WriteHeader(http.StatusNoContent)
}

// readRule authorizes a rule write and decodes and validates its body.
// pathID, if not empty, is the id from the URL.
func (a *api) readRule(w http.ResponseWriter, r *http.Request, pathID string) (rules.Rule, error) {
	what := "creating a rule"
	if pathID != "" {
		what = "writing a rule"
	}
	if err := a.authorize(r, accessAdmin, what); err != nil {
		return rules.Rule{}, err
	}
	data, err := readBody(w, r)
	if err != nil {
		return rules.Rule{}, err
	}
	rule, err := rules.DecodeJSON(data)
	if err != nil {
		return rule, err
	}
	switch {
	case pathID == "":
	case rule.ID == "":
		rule.ID = pathID
	case rule.ID != pathID:
		return rule, fmt.Errorf("%w: id %q in the body does not match %q in the path", rules.ErrInvalid, rule.ID, pathID)
	}
	return rule, rule.Validate(a.cfg.MaxLogLimit)
}

// stored returns the rule as the store holds it (algorithm in lower case).
func (a *api) stored(r rules.Rule) rules.Rule {
	if got, ok := a.cfg.Rules.Rule(r.ID); ok {
		return got
	}
	return r
}
