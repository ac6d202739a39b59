package httpapi

import (
	"context"
	"net/http"
	"time"
)

// StatusPage is the live status page (statuspage.Source satisfies it).
type StatusPage interface {
	// StatusReport returns GET /v1/stats's JSON-encodable answer; in a
	// cluster it asks the other members, giving up by ctx's deadline. It
	// names blocked identifiers and their reasons only if blockDetails.
	StatusReport(ctx context.Context, blockDetails bool) any
	// ServeAsset writes the page's file name ("index.html", "app.js",
	// "style.css"), or a 404.
	ServeAsset(w http.ResponseWriter, name string)
	// ServePage writes the page with initial, StatusReport's answer, in
	// it, so that its first paint shows figures; nil: none (the reader
	// may not see them, and the page asks for a token).
	ServePage(w http.ResponseWriter, initial any)
}

// statusGather bounds how long GET /v1/stats waits for the other members
// of a cluster: the page polls every second, and a member that does not
// answer by then is shown as down.
const statusGather = 1500 * time.Millisecond

// routeStatus serves the status page: GET /status (the page and its
// files, open to anyone: they hold no figures) and GET /v1/stats (the
// figures, which name keys: the password when one is set, as reading
// rules). The blocked identifiers and their reasons among the figures
// need what GET /v1/blocks needs (the admin token when one is set): a
// reader with the password alone gets the blocks' counts without them,
// and the page goes on working for it.
func (a *api) routeStatus(mux *http.ServeMux) {
	page := a.cfg.Status
	a.handle(mux, "GET /status", "status", func(w http.ResponseWriter, r *http.Request) {
		// The figures of the first paint, for a reader who may see them
		// (a browser sends no token with its first request: on a node
		// with a password the page asks for it, as before).
		var initial any
		if a.authorize(r, accessCheck, "reading the status figures") == nil {
			details := a.authorize(r, accessAdmin, "reading blocked identifiers") == nil
			ctx, cancel := context.WithTimeout(r.Context(), statusGather)
			initial = page.StatusReport(ctx, details)
			cancel()
		}
		w.Header().Set("Cache-Control", "no-store")
		page.ServePage(w, initial)
	})
	a.handle(mux, "GET /status/{$}", "status", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "../status", http.StatusMovedPermanently)
	})
	a.handle(mux, "GET /status/{name}", "status", func(w http.ResponseWriter, r *http.Request) {
		page.ServeAsset(w, r.PathValue("name"))
	})
	a.handle(mux, "GET /v1/stats", "stats", func(w http.ResponseWriter, r *http.Request) {
		if err := a.authorize(r, accessCheck, "reading the status figures"); err != nil {
			writeError(w, err)
			return
		}
		details := a.authorize(r, accessAdmin, "reading blocked identifiers") == nil
		ctx, cancel := context.WithTimeout(r.Context(), statusGather)
		defer cancel()
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, page.StatusReport(ctx, details))
	})
}
