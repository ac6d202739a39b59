// Package chart draws horizontal bar charts as PNG with the standard
// library and a built-in 5×7 bitmap font, for the benchmark comparison's
// results. It imports nothing of ours and no plotting library.
package chart

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
)

// Bar is one bar: its label on the left, its length, the text written
// after it, and its color.
type Bar struct {
	Label string
	Value float64
	Text  string
	Color color.RGBA
}

// Panel is a group of bars sharing one scale, under a title.
type Panel struct {
	Title string
	Bars  []Bar
}

// Legend names a color.
type Legend struct {
	Name  string
	Color color.RGBA
}

// Colors used by the comparison.
var (
	Blue      = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	LightBlue = color.RGBA{0x9e, 0xc9, 0xe9, 0xff}
	Red       = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	Grey      = color.RGBA{0x7f, 0x7f, 0x7f, 0xff}
	Green     = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	black     = color.RGBA{0x20, 0x20, 0x20, 0xff}
	light     = color.RGBA{0xe8, 0xe8, 0xe8, 0xff}
)

const (
	scale   = 2          // font pixel size
	charW   = 6 * scale  // advance per character
	lineH   = 9 * scale  // text line height
	rowH    = 12 * scale // bar row height
	barH    = 8 * scale  // bar thickness
	margin  = 8 * scale  // outer margin
	width   = 1400       // image width
	valueW  = 24 * charW // room for the text after the longest bar
	minBarW = 2          // a non-zero value is at least this wide
)

// Render draws title, the lines of notes under it, a legend and the panels.
func Render(w io.Writer, title string, notes []string, legend []Legend, panels []Panel) error {
	labelW := 0
	rows := 0
	for _, p := range panels {
		rows += len(p.Bars)
		for _, b := range p.Bars {
			labelW = max(labelW, len([]rune(b.Label))*charW)
		}
	}
	labelW += charW
	height := margin*2 + lineH*(2+len(notes)) + lineH + len(panels)*(lineH*2) + rows*rowH + margin
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	y := margin
	text(img, margin, y, title, black)
	y += lineH * 2
	for _, n := range notes {
		text(img, margin, y, n, Grey)
		y += lineH
	}
	x := margin
	for _, l := range legend {
		fill(img, x, y+scale, x+barH, y+scale+barH, l.Color)
		text(img, x+barH+charW/2, y+scale, l.Name, black)
		x += barH + charW*(len([]rune(l.Name))+3)
	}
	y += lineH
	barX0, barX1 := margin+labelW, width-margin-valueW
	for _, p := range panels {
		y += lineH / 2
		text(img, margin, y, p.Title, black)
		y += lineH + lineH/2
		top := 0.0
		for _, b := range p.Bars {
			top = max(top, b.Value)
		}
		fill(img, barX0, y-scale, barX0+1, y+len(p.Bars)*rowH, light)
		for _, b := range p.Bars {
			text(img, margin, y+(rowH-7*scale)/2-scale, b.Label, black)
			n := 0
			if top > 0 {
				n = int(b.Value / top * float64(barX1-barX0))
			}
			if b.Value > 0 {
				n = max(n, minBarW)
			}
			fill(img, barX0, y+(rowH-barH)/2-scale, barX0+n, y+(rowH-barH)/2-scale+barH, b.Color)
			text(img, barX0+n+charW/2, y+(rowH-7*scale)/2-scale, b.Text, black)
			y += rowH
		}
	}
	return png.Encode(w, img)
}

func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

// text draws s with its top-left corner at (x, y).
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		for row, bits := range glyph(r) {
			for col, b := range bits {
				if b == '#' {
					fill(img, x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale, c)
				}
			}
		}
		x += charW
	}
}
