package chart

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"
)

// Series is one line of a line chart: the points (X[i], Y[i]), X
// increasing.
type Series struct {
	Name  string
	Color color.RGBA
	X, Y  []float64
}

// Mark is a horizontal reference line across a line chart, such as a
// bound the series should stay under.
type Mark struct {
	Name  string
	Y     float64
	Color color.RGBA
}

// Line chart geometry.
const (
	plotH   = 480        // height of the plotting area
	axisW   = 10 * charW // room for the y labels
	yTicks  = 5
	xTicks  = 10
	lineTh  = 2 // line thickness
	markDot = 6 // dash length of a mark
)

// RenderLines draws title, notes and a legend, then the series as lines
// over a shared scale from 0 to the largest value (marks included), with
// the y axis labelled in units of yDiv named yUnit (MB for bytes/1e6) and
// the x axis in xUnit.
func RenderLines(w io.Writer, title string, notes []string, xUnit, yUnit string, yDiv float64,
	series []Series, marks []Mark) error {
	height := margin*2 + lineH*(3+len(notes)) + plotH + lineH*2
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	y := margin
	text(img, margin, y, title, black)
	y += lineH * 2
	for _, n := range notes {
		text(img, margin, y, n, Grey)
		y += lineH
	}
	legend(img, y, series, marks)
	y += lineH * 2
	x0, x1, y0, y1 := margin+axisW, width-margin, y+plotH, y
	xMax, yMax := extent(series, marks)
	px := func(v float64) int { return x0 + int(v/xMax*float64(x1-x0)) }
	py := func(v float64) int { return y0 - int(v/yMax*float64(y0-y1)) }
	for i := 0; i <= yTicks; i++ {
		v := yMax * float64(i) / yTicks
		fill(img, x0, py(v), x1, py(v)+1, light)
		text(img, margin, py(v)-lineH/2+scale, format(v/yDiv)+" "+yUnit, Grey)
	}
	for i := 0; i <= xTicks; i++ {
		v := xMax * float64(i) / xTicks
		fill(img, px(v), y1, px(v)+1, y0, light)
		text(img, px(v)-charW, y0+scale*2, format(v)+xUnit, Grey)
	}
	for _, m := range marks {
		for x := x0; x < x1; x += 2 * markDot {
			fill(img, x, py(m.Y), min(x+markDot, x1), py(m.Y)+lineTh, m.Color)
		}
	}
	for _, s := range series {
		for i := 1; i < len(s.X) && i < len(s.Y); i++ {
			segment(img, px(s.X[i-1]), py(s.Y[i-1]), px(s.X[i]), py(s.Y[i]), s.Color)
		}
	}
	return png.Encode(w, img)
}

// legend names the series and marks in a row at y.
func legend(img *image.RGBA, y int, series []Series, marks []Mark) {
	x := margin
	item := func(name string, c color.RGBA) {
		fill(img, x, y+scale, x+barH, y+scale+barH, c)
		text(img, x+barH+charW/2, y+scale, name, black)
		x += barH + charW*(len([]rune(name))+3)
	}
	for _, s := range series {
		item(s.Name, s.Color)
	}
	for _, m := range marks {
		item(m.Name, m.Color)
	}
}

// extent returns the largest x and y to show, never 0.
func extent(series []Series, marks []Mark) (float64, float64) {
	xMax, yMax := 1.0, 1.0
	for _, s := range series {
		for _, v := range s.X {
			xMax = max(xMax, v)
		}
		for _, v := range s.Y {
			yMax = max(yMax, v)
		}
	}
	for _, m := range marks {
		yMax = max(yMax, m.Y)
	}
	return xMax, yMax * 1.05
}

// segment draws a line of thickness lineTh from (xa, ya) to (xb, yb).
func segment(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA) {
	n := max(abs(xb-xa), abs(yb-ya), 1)
	for i := 0; i <= n; i++ {
		x := xa + (xb-xa)*i/n
		y := ya + (yb-ya)*i/n
		fill(img, x, y, x+lineTh, y+lineTh, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// format writes v with at most one decimal.
func format(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
