package nodes

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// WriteResults writes a tool's results into dir (created if need be): v
// as indented JSON to name.json and md to name.md.
func WriteResults(dir, name string, v any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(dir, name)
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+".md", []byte(md), 0o644)
}

// WriteChart creates path and has draw write a chart into it.
func WriteChart(path string, draw func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return draw(f)
}
