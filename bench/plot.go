package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots draws the PNGs for the results present and returns their names.
func (s *Suite) WritePlots() ([]string, error) {
	var names []string
	save := func(p *plot.Plot, name string) error {
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(s.Out, name)); err != nil {
			return fmt.Errorf("bench: saving %s: %w", name, err)
		}
		names = append(names, name)
		return nil
	}
	if len(s.Overheads) > 0 {
		size := s.PlotSize()
		for _, l := range Loads {
			p, ok, err := overheadPlot(s.Overheads, l, size)
			if err != nil {
				return names, err
			}
			if ok {
				if err := save(p, "overhead_"+string(l)+".png"); err != nil {
					return names, err
				}
			}
		}
	}
	if len(s.H2H) > 0 {
		p, err := cdfPlot(s.H2H)
		if err != nil {
			return names, err
		}
		if err := save(p, "detection_cdf.png"); err != nil {
			return names, err
		}
		p, err = h2hPlot(s.H2H)
		if err != nil {
			return names, err
		}
		if err := save(p, "h2h.png"); err != nil {
			return names, err
		}
	}
	return names, nil
}

func overheadPlot(rows []OverheadRow, l Load, size int) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %d B: overhead on t_max (medians of interleaved runs), δ = 10h", l, size)
	p.X.Label.Text = "h (µs, log scale)"
	p.Y.Label.Text = "overhead (%)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{}
	var band float64
	var xs []float64
	var args []any
	for _, pl := range []Placement{InProcess, StandAlone} {
		var pts plotter.XYs
		for _, r := range rows {
			if r.Load == l && r.Size == size && r.Placement == pl && !math.IsNaN(r.MedianOverhead) {
				pts = append(pts, plotter.XY{X: float64(r.H) / 1e3, Y: 100 * r.MedianOverhead})
				band = r.Band.Rel
				xs = append(xs, float64(r.H)/1e3)
			}
		}
		if len(pts) > 0 {
			slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
			args = append(args, string(pl), pts)
		}
	}
	if len(args) == 0 {
		return nil, false, nil
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	poly, err := plotter.NewPolygon(plotter.XYs{{X: lo, Y: -100 * band}, {X: hi, Y: -100 * band}, {X: hi, Y: 100 * band}, {X: lo, Y: 100 * band}})
	if err != nil {
		return nil, false, err
	}
	poly.Color = color.RGBA{R: 200, G: 200, B: 200, A: 255}
	poly.LineStyle.Width = 0
	p.Add(poly)
	p.Legend.Add(fmt.Sprintf("variability band of the off runs ±%.1f %%", 100*band), poly)
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, false, err
	}
	p.Legend.Top = true
	return p, true, nil
}

func cdfPlot(rows []H2HRow) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Detection latency CDF (kill -9 → survivor's report, all kills)"
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "fraction of reports"
	var args []any
	for _, r := range rows {
		lat := append(append(slices.Clone(r.One.Latencies), r.Spread.Latencies...), r.Adjacent.Latencies...)
		if len(lat) == 0 {
			continue
		}
		ms := make([]float64, len(lat))
		for i, d := range lat {
			ms[i] = float64(d) / float64(time.Millisecond)
		}
		x, y := CDF(ms)
		pts := make(plotter.XYs, len(x))
		for i := range x {
			pts[i] = plotter.XY{X: x[i], Y: y[i]}
		}
		args = append(args, fmt.Sprintf("%s N=%d", r.System, r.N), pts)
	}
	if len(args) > 0 {
		if err := plotutil.AddLines(p, args...); err != nil {
			return nil, err
		}
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = -vg.Inch * 0.5
	return p, nil
}

func h2hPlot(rows []H2HRow) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Vigil vs memberlist: time until every survivor knows"
	p.X.Label.Text = "N (processes)"
	p.Y.Label.Text = "stabilization (ms)"
	var args []any
	for _, sys := range []System{Vigil, Memberlist} {
		for i, kind := range []string{"one kill", "spread", "adjacent"} {
			var pts plotter.XYs
			for _, r := range rows {
				if r.System != sys {
					continue
				}
				d := []Kill{r.One, r.Spread, r.Adjacent}[i].Stable
				if d > 0 {
					pts = append(pts, plotter.XY{X: float64(r.N), Y: float64(d) / float64(time.Millisecond)})
				}
			}
			if len(pts) > 0 {
				args = append(args, fmt.Sprintf("%s, %s", sys, kind), pts)
			}
		}
	}
	if len(args) > 0 {
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return nil, err
		}
	}
	p.Legend.Top = true
	return p, nil
}
