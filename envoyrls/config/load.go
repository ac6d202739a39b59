package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/boundedfile"
)

// Load reads path, a YAML file or a directory whose *.yaml and *.yml files
// (not its subdirectories) are read in name order, into a new Config. The
// first error, an *Error naming the file, line and field, is returned.
// Files are read with bounds (boundedfile): at most opt.MaxBytes in all, and
// a FIFO or device that does not end soon is given up.
func Load(path string, opt Options) (*Config, error) {
	files, err := Files(path)
	if err != nil {
		return nil, err
	}
	limit := opt.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	left := limit
	cfg := Empty()
	for _, f := range files {
		data, err := boundedfile.Read(f, left, readWait)
		if errors.Is(err, boundedfile.ErrTooLarge) {
			return nil, &Error{File: f, Msg: fmt.Sprintf("%v: the configuration is larger than --max-config-bytes (%d bytes in all); raise it to load this one", err, limit)}
		}
		if err != nil {
			return nil, &Error{File: f, Msg: err.Error()}
		}
		left -= int64(len(data))
		if err := Parse(cfg, f, data, opt); err != nil {
			return nil, err
		}
	}
	cfg.files = files
	return cfg, nil
}

// Files returns the configuration files path names: itself if it is a
// file, else its *.yaml and *.yml files in name order.
func Files(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		out = append(out, filepath.Join(path, name))
	}
	sort.Strings(out)
	return out, nil
}

// Stamp summarises path's files (names, sizes, modification times) so that
// a watcher can tell whether they changed; an unreadable path gives "".
func Stamp(path string) string {
	files, err := Files(path)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			b.WriteString(f + ":gone;")
			continue
		}
		b.WriteString(f + ":" + fi.ModTime().Format(time.RFC3339Nano) + ":" + itoa(fi.Size()) + ";")
	}
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
