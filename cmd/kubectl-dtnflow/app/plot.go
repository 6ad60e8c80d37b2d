package app

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"os"

	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	vgdraw "gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/planning"
)

// plotDPI is the resolution the plot is drawn at; --width and --height are in pixels.
const plotDPI = 96

func plotCommand() *command {
	var out string
	var width, height int
	return &command{
		name: "plot", short: "draw samples, fitted curve, plan and achieved rate into a PNG", args: "JOB -o FILE.png [--width PX --height PX]",
		summary: "Draw a job as a PNG: above, the probe samples and the fitted stream curve of one stripe with\n" +
			"the plan's streams; below, the achieved rate over time against the plan's prediction, with\n" +
			"every re-plan marked.",
		flags: func(fs *pflag.FlagSet, o *Options) {
			fs.StringVarP(&out, "output", "o", "", "the PNG file to write (- for standard output)")
			fs.IntVar(&width, "width", 1200, "image width in pixels")
			fs.IntVar(&height, "height", 900, "image height in pixels")
		},
		run: func(ctx context.Context, o *Options, args []string) error {
			name, err := exactlyOneJob(args)
			if err != nil {
				return err
			}
			if out == "" {
				return usageError("-o FILE.png is required")
			}
			if width < 200 || height < 200 || width > 10000 || height > 10000 {
				return usageError("--width and --height must be between 200 and 10000 pixels")
			}
			if err := o.complete(); err != nil {
				return err
			}
			job, err := o.getJob(ctx, name)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := renderPlot(&buf, job, width, height); err != nil {
				return err
			}
			if out == "-" {
				_, err = o.Out.Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(o.Err, "Wrote %s (%d×%d)\n", out, width, height)
			return nil
		},
	}
}

// rateUnit is the unit the rate axes use: Gbit/s when any rate reaches one, else Mbit/s.
type rateUnit struct {
	name string
	div  float64
}

func unitFor(job *dtnflowv1alpha1.TransferJob) rateUnit {
	var peak int64
	for _, s := range job.Status.Samples {
		peak = max(peak, s.BitsPerSecond)
	}
	for _, r := range job.Status.RateHistory {
		peak = max(peak, r.BitsPerSecond)
	}
	if p := job.Status.Plan; p != nil {
		peak = max(peak, p.PredictedBitsPerSecond)
	}
	if peak >= 1e9 {
		return rateUnit{"Gbit/s", 1e9}
	}
	return rateUnit{"Mbit/s", 1e6}
}

// renderPlot draws the job's two panels into a PNG of width × height pixels.
func renderPlot(w io.Writer, job *dtnflowv1alpha1.TransferJob, width, height int) error {
	unit := unitFor(job)
	streams, err := streamsPlot(job, unit)
	if err != nil {
		return err
	}
	overTime, err := ratePlot(job, unit)
	if err != nil {
		return err
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	canvas := vgimg.NewWith(vgimg.UseImage(img), vgimg.UseDPI(plotDPI))
	dc := vgdraw.New(canvas)
	tiles := vgdraw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 5}
	cells := plot.Align([][]*plot.Plot{{streams}, {overTime}}, tiles, dc)
	streams.Draw(cells[0][0])
	overTime.Draw(cells[1][0])
	return png.Encode(w, canvas.Image()) // the canvas draws on its own copy of img
}

var (
	sampleColor    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	modelColor     = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	planColor      = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	replanColor    = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	achievedColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	predictedColor = planColor
)

// streamsPlot is the upper panel: throughput of one stripe against its streams.
func streamsPlot(job *dtnflowv1alpha1.TransferJob, unit rateUnit) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s/%s: one stripe's rate against its streams", job.Namespace, job.Name)
	p.X.Label.Text = "parallel TCP streams"
	p.Y.Label.Text = unit.name
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	maxStreams := 8.0
	var maxRate float64
	if len(job.Status.Samples) > 0 {
		pts := make(plotter.XYs, len(job.Status.Samples))
		for i, s := range job.Status.Samples {
			pts[i].X, pts[i].Y = float64(s.Streams), float64(s.BitsPerSecond)/unit.div
			maxStreams, maxRate = max(maxStreams, pts[i].X), max(maxRate, pts[i].Y)
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = sampleColor, vg.Points(4), vgdraw.CircleGlyph{}
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("probe samples (%d)", len(pts)), sc)
	} else {
		p.Title.Text += " (no probe samples)"
	}
	plan := job.Status.Plan
	if plan != nil {
		maxStreams = max(maxStreams, float64(plan.StreamsPerStripe)*1.25)
	}
	if plan != nil && plan.Model != nil {
		fit, err := planning.Fit(plan.Model)
		if err == nil && fit != nil {
			maxStreams = max(maxStreams, float64(fit.OptimalStreams)*1.5)
			// streams are whole: the curve joins the model's value at each count
			curve := make(plotter.XYs, 0, int(maxStreams))
			for n := 1; n <= int(maxStreams); n++ {
				curve = append(curve, plotter.XY{X: float64(n), Y: fit.BitsPerSecond(n) / unit.div})
			}
			f, err := plotter.NewLine(curve)
			if err != nil {
				return nil, err
			}
			f.LineStyle.Color, f.LineStyle.Width = modelColor, vg.Points(2)
			p.Add(f)
			p.Legend.Add(fmt.Sprintf("fitted %s model (peak at %d streams)", plan.Model.Name, plan.Model.OptimalStreams), f)
			maxRate = max(maxRate, fit.BitsPerSecond(fit.OptimalStreams)/unit.div)
		}
	}
	if plan != nil {
		x := float64(plan.StreamsPerStripe)
		var y float64
		if plan.Model != nil {
			y = float64(plan.Model.PeakBitsPerSecond) / unit.div
		}
		if stripes := int64(len(plan.SourceNodes)) * int64(plan.StripesPerNode); y == 0 && stripes > 0 {
			y = float64(plan.PredictedBitsPerSecond) / float64(stripes) / unit.div
		}
		maxRate = max(maxRate, y)
		line, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: y}})
		if err != nil {
			return nil, err
		}
		line.LineStyle.Color, line.LineStyle.Width, line.LineStyle.Dashes = planColor, vg.Points(2), []vg.Length{vg.Points(6), vg.Points(3)}
		mark, err := plotter.NewScatter(plotter.XYs{{X: x, Y: y}})
		if err != nil {
			return nil, err
		}
		mark.GlyphStyle.Color, mark.GlyphStyle.Radius, mark.GlyphStyle.Shape = planColor, vg.Points(6), vgdraw.PyramidGlyph{}
		p.Add(line, mark)
		p.Legend.Add(fmt.Sprintf("plan: %d stream(s) per stripe", plan.StreamsPerStripe), line, mark)
	}
	p.X.Min, p.X.Max = 0, maxStreams
	p.Y.Min, p.Y.Max = 0, max(maxRate*1.15, 1)
	return p, nil
}

// ratePlot is the lower panel: the job's aggregate rate over time, the prediction and
// the re-plans.
func ratePlot(job *dtnflowv1alpha1.TransferJob, unit rateUnit) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "aggregate rate over time"
	p.X.Label.Text = "time (UTC)"
	p.X.Tick.Marker = plot.TimeTicks{Format: "15:04:05"}
	p.Y.Label.Text = unit.name
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	st := &job.Status
	start, end := 0.0, 0.0
	extend := func(t float64) {
		if start == 0 || t < start {
			start = t
		}
		end = max(end, t)
	}
	if st.StartTime != nil {
		extend(float64(st.StartTime.Unix()))
	}
	if st.CompletionTime != nil {
		extend(float64(st.CompletionTime.Unix()))
	}
	var maxRate float64
	if len(st.RateHistory) > 0 {
		pts := make(plotter.XYs, len(st.RateHistory))
		for i, r := range st.RateHistory {
			pts[i].X, pts[i].Y = float64(r.Time.Unix()), float64(r.BitsPerSecond)/unit.div
			extend(pts[i].X)
			maxRate = max(maxRate, pts[i].Y)
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		line.LineStyle.Color, line.LineStyle.Width = achievedColor, vg.Points(2)
		points.GlyphStyle.Color, points.GlyphStyle.Radius = achievedColor, vg.Points(2)
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("achieved (%d reports)", len(pts)), line, points)
	} else {
		p.Title.Text += " (no reports yet)"
	}
	for _, r := range st.Replans {
		extend(float64(r.Time.Unix()))
	}
	if end <= start {
		end = start + 60
	}
	if plan := st.Plan; plan != nil && plan.PredictedBitsPerSecond > 0 {
		y := float64(plan.PredictedBitsPerSecond) / unit.div
		maxRate = max(maxRate, y)
		line, err := plotter.NewLine(plotter.XYs{{X: start, Y: y}, {X: end, Y: y}})
		if err != nil {
			return nil, err
		}
		line.LineStyle.Color, line.LineStyle.Width, line.LineStyle.Dashes = predictedColor, vg.Points(2), []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(line)
		p.Legend.Add("predicted by the current plan", line)
	}
	if prog := st.Progress; prog != nil && prog.AverageBitsPerSecond > 0 {
		// a short run may have no report in mid-transfer: its average still shows
		y := float64(prog.AverageBitsPerSecond) / unit.div
		maxRate = max(maxRate, y)
		line, err := plotter.NewLine(plotter.XYs{{X: start, Y: y}, {X: end, Y: y}})
		if err != nil {
			return nil, err
		}
		line.LineStyle.Color, line.LineStyle.Width, line.LineStyle.Dashes = achievedColor, vg.Points(1), []vg.Length{vg.Points(2), vg.Points(4)}
		p.Add(line)
		p.Legend.Add("achieved on average since the start", line)
	}
	top := max(maxRate*1.15, 1)
	for i, r := range st.Replans {
		x := float64(r.Time.Unix())
		line, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
		if err != nil {
			return nil, err
		}
		line.LineStyle.Color, line.LineStyle.Dashes = replanColor, []vg.Length{vg.Points(2), vg.Points(2)}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: top * 0.97}}, Labels: []string{r.Reason}})
		if err != nil {
			return nil, err
		}
		p.Add(line, labels)
		if i == 0 {
			p.Legend.Add("re-plan", line)
		}
	}
	p.X.Min, p.X.Max = start, end
	p.Y.Min, p.Y.Max = 0, top
	return p, nil
}
