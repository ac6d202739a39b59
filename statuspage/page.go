package statuspage

import (
	"context"
	"embed"
	"net/http"
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

// StatusReport returns Stats(ctx, blockDetails) for httpapi, which serves
// it as GET /v1/stats.
func (s *Source) StatusReport(ctx context.Context, blockDetails bool) any {
	return s.Stats(ctx, blockDetails)
}

// ServeAsset serves the page's file name (see ServeAsset).
func (s *Source) ServeAsset(w http.ResponseWriter, name string) { ServeAsset(w, name) }
