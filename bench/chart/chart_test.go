package chart

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
)

func TestGlyphsAreFiveBySeven(t *testing.T) {
	for r, g := range glyphs {
		rows := strings.Split(g, "|")
		if len(rows) != 7 {
			t.Errorf("%q: %d rows", r, len(rows))
		}
		for _, row := range rows {
			if len([]rune(row)) != 5 || strings.Trim(row, ".#") != "" {
				t.Errorf("%q: bad row %q", r, row)
			}
		}
	}
}

func TestRenderDecodes(t *testing.T) {
	var buf bytes.Buffer
	err := Render(&buf, "Throughput", []string{"2 cores"}, []Legend{{"rlserver", Blue}, {"redis", Red}},
		[]Panel{{Title: "P16", Bars: []Bar{{"rl.check token", 400000, "400K", Blue}, {"incr", 350000, "350K", Red}, {"zero", 0, "0", Grey}}}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil || img.Bounds().Dx() != width {
		t.Fatalf("decode: %v, bounds %v", err, img.Bounds())
	}
}

func TestRenderLinesDecodes(t *testing.T) {
	var buf bytes.Buffer
	rss := Series{Name: "RSS", Color: Blue, X: []float64{0, 1, 2, 3}, Y: []float64{10e6, 200e6, 260e6, 255e6}}
	err := RenderLines(&buf, "Soak", []string{"10 min"}, "s", "MB", 1e6, []Series{rss},
		[]Mark{{Name: "maxmemory", Y: 256e6, Color: Red}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil || img.Bounds().Dx() != width {
		t.Fatalf("decode: %v, bounds %v", err, img.Bounds())
	}
}
