// Package headless drives Debian's chromium in headless mode for the
// tests of the status page: load a page, let its script run (a virtual
// time budget, so that its timers fire without the test sleeping), and
// hand back the DOM it built, or a screenshot. A test fails when chromium
// is not installed, naming the package: CI installs it (.ci/run), as every
// tool the tests need.
package headless

import (
	"context"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// budgetMs is the virtual time a page runs for before it is dumped: long
// enough for a few of the status page's one-second polls.
const budgetMs = "5000"

// Browser returns chromium's path (chromium, else chromium-browser, on
// PATH), or fails the test when there is none, with how to install it
// (testutil.RequireTool).
func Browser(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		if p, err := exec.LookPath("chromium-browser"); err == nil {
			return p
		}
	}
	return testutil.RequireTool(t, "chromium", "apt-get install chromium fonts-dejavu-core")
}

// run runs chromium on url with extra flags and returns its stdout.
func run(t testing.TB, url string, extra ...string) []byte {
	t.Helper()
	bin := Browser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=" + budgetMs}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr limited
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.b)
	}
	return out
}

// DumpDOM loads url, lets its scripts run for a few seconds of virtual
// time, and returns the document as HTML.
func DumpDOM(t testing.TB, url string) string {
	t.Helper()
	return string(run(t, url, "--dump-dom"))
}

// Ticks returns the values written on the y axis of id (a chart's scale,
// as elements of class "tick" with data-value), top first.
func Ticks(dom, id string) []string {
	_, rest, ok := strings.Cut(dom, `id="`+id+`"`)
	if !ok {
		return nil
	}
	rest, _, _ = strings.Cut(rest, "</div>")
	var out []string
	for _, part := range strings.Split(rest, `class="tick"`)[1:] {
		_, text, _ := strings.Cut(part, ">")
		text, _, _ = strings.Cut(text, "<")
		out = append(out, text)
	}
	return out
}

// Screenshot loads url in a window of width×height pixels and writes a
// PNG of it to file.
func Screenshot(t testing.TB, url, file string, width, height int) {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	run(t, url, "--screenshot="+abs, "--hide-scrollbars",
		"--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height))
	if st, err := os.Stat(abs); err != nil || st.Size() == 0 {
		t.Fatalf("chromium wrote no screenshot to %s: %v", abs, err)
	}
}

// limited keeps the first 8 KiB written to it (chromium's stderr).
type limited struct{ b []byte }

func (l *limited) Write(p []byte) (int, error) {
	if room := 8192 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Row returns the inner HTML of the first <tr> whose attribute attr is
// value (as the status page marks its rows: data-rule="login"), and
// whether there is one.
func Row(dom, attr, value string) (string, bool) {
	open := "<tr " + attr + `="` + html.EscapeString(value) + `">`
	i := strings.Index(dom, open)
	if i < 0 {
		return "", false
	}
	rest := dom[i+len(open):]
	j := strings.Index(rest, "</tr>")
	if j < 0 {
		return "", false
	}
	return rest[:j], true
}

// Rows counts the <tr> elements that carry attribute attr.
func Rows(dom, attr string) int { return strings.Count(dom, "<tr "+attr+`="`) }

// Cell returns the text of the first <td> of row whose class list
// includes class, and whether there is one.
func Cell(row, class string) (string, bool) {
	re := regexp.MustCompile(`<td class="([^"]*)">([^<]*)</td>`)
	for _, m := range re.FindAllStringSubmatch(row, -1) {
		if slices.Contains(strings.Fields(m[1]), class) {
			return html.UnescapeString(m[2]), true
		}
	}
	return "", false
}

// Number parses a figure as the page prints it ("1,234").
func Number(s string) (int64, error) {
	return strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
}

// Points returns the number of points of the polyline in the <svg> of the
// given id, or -1 if there is none.
func Points(dom, svgID string) int {
	i := strings.Index(dom, `<svg id="`+svgID+`"`)
	if i < 0 {
		return -1
	}
	end := strings.Index(dom[i:], "</svg>")
	if end < 0 {
		return -1
	}
	m := regexp.MustCompile(`<polyline[^>]* points="([^"]*)"`).FindStringSubmatch(dom[i : i+end])
	if m == nil {
		return -1
	}
	return len(strings.Fields(m[1]))
}
