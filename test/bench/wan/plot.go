package wan

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/dtnflow/dtnflow/optimizer"
)

// toolStyle gives each grid tool a colour; fixed rows are drawn as single marks.
var toolColors = map[string]color.Color{
	string(GridFTPGrid):    color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	string(GridFTPDefault): color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	string(GridFTPPreset):  color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	string(DtnflowGrid):    color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	string(DtnflowAuto):    color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"iperf3":               color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// FitStreams fits the optimizer's stream models (BestCmb over Dinda, Newton and the
// full second-order model) to a tool's samples: throughput against streams.
func FitStreams(samples []Result) (optimizer.StreamFit, error) {
	var pts []optimizer.StreamPoint
	for _, r := range samples {
		pts = append(pts, optimizer.StreamPoint{Streams: r.Streams, BitsPerSecond: r.BitsPerSecond})
	}
	return optimizer.BestCmb(pts)
}

// Plot draws one scenario: throughput against streams for every sample, the fitted
// model curve of each grid tool, each tool's chosen point, and the link rate.
func Plot(scenario string, linkBPS float64, rs []Result, path string) error {
	p := plot.New()
	p.Title.Text = "Throughput vs streams — " + scenario
	p.X.Label.Text = "TCP streams (log scale)"
	p.Y.Label.Text = "Mbit/s"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	// Bottom right: throughputs are high, so that corner is usually empty.
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())

	maxStreams := 1
	byTool := map[string][]Result{}
	var tools []string
	for _, r := range rs {
		if r.Scenario != scenario {
			continue
		}
		if _, ok := byTool[r.Tool]; !ok {
			tools = append(tools, r.Tool)
		}
		byTool[r.Tool] = append(byTool[r.Tool], r)
		maxStreams = max(maxStreams, r.Streams)
	}
	if linkBPS > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: 1, Y: linkBPS / 1e6}, {X: float64(maxStreams), Y: linkBPS / 1e6}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		l.Color = color.Black
		p.Add(l)
		p.Legend.Add("link rate", l)
	}
	for _, tool := range tools {
		c := toolColors[tool]
		if c == nil {
			c = color.Black
		}
		var samples, chosen plotter.XYs
		var sampleResults []Result
		// send --auto fits its stream samples at the buffer it chose (one stripe);
		// its buffer and stripe samples are drawn but not fitted
		var autoBuffer int64 = -1
		if tool == string(DtnflowAuto) {
			for _, r := range byTool[tool] {
				if r.Chosen {
					autoBuffer = r.BufferBytes
				}
			}
		}
		for _, r := range byTool[tool] {
			xy := plotter.XY{X: float64(max(1, r.Streams)), Y: r.BitsPerSecond / 1e6}
			if r.Sample {
				samples = append(samples, xy)
				if autoBuffer < 0 || (r.Stripes <= 1 && r.BufferBytes == autoBuffer) {
					sampleResults = append(sampleResults, r)
				}
			}
			if r.Chosen {
				chosen = append(chosen, xy)
			}
		}
		if len(samples) > 0 {
			s, err := plotter.NewScatter(samples)
			if err != nil {
				return err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(s)
			p.Legend.Add(tool+" samples", s)
			if fit, err := FitStreams(sampleResults); err == nil {
				var curve plotter.XYs
				for n := 1; n <= maxStreams; n++ {
					if y := fit.BitsPerSecond(n); !math.IsNaN(y) && !math.IsInf(y, 0) && y > 0 {
						curve = append(curve, plotter.XY{X: float64(n), Y: y / 1e6})
					}
				}
				if len(curve) > 1 {
					l, err := plotter.NewLine(curve)
					if err != nil {
						return err
					}
					l.Color = c
					l.Width = vg.Points(1.5)
					p.Add(l)
					p.Legend.Add(fmt.Sprintf("%s fit (%s, optimum %d)", tool, fit.Model, fit.OptimalStreams), l)
				}
			}
		}
		if len(chosen) > 0 {
			sort.Slice(chosen, func(i, j int) bool { return chosen[i].X < chosen[j].X })
			s, err := plotter.NewScatter(chosen)
			if err != nil {
				return err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(5), Shape: draw.PyramidGlyph{}}
			p.Add(s)
			label := tool
			if len(samples) > 0 {
				label += " chosen (whole dataset)"
			}
			p.Legend.Add(label, s)
		}
	}
	// Streams start at 1, and a log axis needs a span: a grid of one setting at one
	// stream puts every point at 1, where the ticks have no range to fall in.
	p.X.Min, p.X.Max = 1, max(p.X.Max, 2)
	p.Y.Min = 0
	if linkBPS > 0 {
		p.Y.Max = max(p.Y.Max, 1.05*linkBPS/1e6)
	}
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}
