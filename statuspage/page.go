package statuspage

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// types are the Content-Types of the assets, by name; a name not here is
// not served.
var types = map[string]string{
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"style.css":  "text/css; charset=utf-8",
}

// Asset returns the embedded file name ("index.html", "app.js",
// "style.css") and its Content-Type; ok is false for any other name.
func Asset(name string) (body []byte, contentType string, ok bool) {
	ct, ok := types[name]
	if !ok {
		return nil, "", false
	}
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		return nil, "", false
	}
	return b, ct, true
}

// ServeAsset writes the asset name, or 404 with a JSON error when there
// is none of that name. The page asks nothing of the request, so it is
// served to anyone; its figures come from GET /v1/stats.
func ServeAsset(w http.ResponseWriter, name string) {
	b, ct, ok := Asset(name)
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"no such file of the status page"}` + "\n"))
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b)
}

// ServePage writes index.html with initial (Stats, as StatusReport
// returns it; nil for none) in it: as JSON in a script element, which
// app.js draws before it first asks /v1/stats, and in the header's facts
// as text, so that the first paint shows figures, scripts or not.
func ServePage(w http.ResponseWriter, initial any) {
	b, ct, _ := Asset("index.html")
	page := string(b)
	if st, ok := initial.(Stats); ok {
		js, err := json.Marshal(st) // escapes <, > and &: no "</script>" can end the element early
		if err == nil {
			page = strings.Replace(page, `<script id="initial-stats" type="application/json"></script>`,
				`<script id="initial-stats" type="application/json">`+string(js)+`</script>`, 1)
		}
		for id, v := range map[string]string{"node": st.Node, "mode": st.Mode, "version": st.Version,
			"uptime": duration(st.UptimeS), "writes": st.Writes, "total-checks": thousands(st.Totals.Checks),
			"total-denied": thousands(st.Totals.Denied)} {
			page = strings.Replace(page, `id="`+id+`">…<`, `id="`+id+`">`+html.EscapeString(v)+`<`, 1)
		}
		page = strings.Replace(page, `<p id="updated" class="muted">waiting for /v1/stats…</p>`,
			`<p id="updated" class="muted">as of `+time.UnixMilli(st.TimeUnixMs).UTC().Format("15:04:05")+` UTC</p>`, 1)
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	io.WriteString(w, page)
}

// duration writes s seconds as app.js's duration does: "2d 3h", "4m 5s".
func duration(s int64) string {
	d, h, m := s/86400, s%86400/3600, s%3600/60
	switch {
	case d > 0:
		return fmt.Sprintf("%dd %dh", d, h)
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, s%60)
	}
	return fmt.Sprintf("%ds", s)
}

// thousands writes n with commas, as app.js's fmt does: 1,234,567.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ServePage serves the page with initial in it (see ServePage).
func (s *Source) ServePage(w http.ResponseWriter, initial any) { ServePage(w, initial) }

// StatusReport returns Stats(ctx, blockDetails) for httpapi, which serves
// it as GET /v1/stats.
func (s *Source) StatusReport(ctx context.Context, blockDetails bool) any {
	return s.Stats(ctx, blockDetails)
}

// ServeAsset serves the page's file name (see ServeAsset).
func (s *Source) ServeAsset(w http.ResponseWriter, name string) { ServeAsset(w, name) }
