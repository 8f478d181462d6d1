package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Panel is one panel of a console dashboard: its title and its queries, with the dashboard's
// $namespace variable filled in.
type Panel struct {
	Title   string
	Queries []PanelQuery
}

// PanelQuery is one query of a panel and how its series are named in the legend.
type PanelQuery struct {
	Expr   string
	Legend string
}

// ReadDashboard reads the console dashboard ConfigMap in file (its one JSON key) and returns its
// panels, with $namespace replaced by namespace.
func ReadDashboard(file, namespace string) (title string, panels []Panel, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(b, &cm); err != nil {
		return "", nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(cm.Data) != 1 {
		return "", nil, fmt.Errorf("%s: %d data keys, not one dashboard", file, len(cm.Data))
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	for key, v := range cm.Data {
		if !strings.HasSuffix(key, ".json") {
			return "", nil, fmt.Errorf("%s: key %s is not a .json dashboard", file, key)
		}
		if err := json.Unmarshal([]byte(v), &dash); err != nil {
			return "", nil, fmt.Errorf("%s: %s: %w", file, key, err)
		}
	}
	for _, p := range dash.Panels {
		panel := Panel{Title: p.Title}
		for _, t := range p.Targets {
			panel.Queries = append(panel.Queries, PanelQuery{Expr: strings.ReplaceAll(t.Expr, "$namespace", namespace), Legend: t.LegendFormat})
		}
		panels = append(panels, panel)
	}
	return dash.Title, panels, nil
}

// Series is one series of a range query: its labels and its points.
type Series struct {
	Labels map[string]string
	Times  []time.Time
	Values []float64
}

// QueryRange evaluates expr from start to end every step.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	if err := p.api(ctx, "/api/v1/query_range?"+q.Encode(), &data); err != nil {
		return nil, fmt.Errorf("query_range %s: %w", expr, err)
	}
	out := make([]Series, 0, len(data.Result))
	for _, r := range data.Result {
		s := Series{Labels: r.Metric}
		for _, v := range r.Values {
			ts, _ := v[0].(float64)
			str, _ := v[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("query_range %s: value %v: %w", expr, v[1], err)
			}
			s.Times = append(s.Times, time.Unix(0, int64(ts*1e9)))
			s.Values = append(s.Values, f)
		}
		out = append(out, s)
	}
	return out, nil
}

// legend names a series as Grafana's legendFormat does: {{label}} is the label's value.
func legend(format string, labels map[string]string) string {
	out := format
	for k, v := range labels {
		out = strings.ReplaceAll(out, "{{"+k+"}}", v)
	}
	// A label the series lacks (Prometheus keeps no empty label) is empty, as Grafana shows it.
	out = strings.TrimSpace(legendLabel.ReplaceAllString(out, ""))
	if out == "" {
		return "value"
	}
	return out
}

// legendLabel is a label reference of a legend format.
var legendLabel = regexp.MustCompile(`\{\{\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\}\}`)

// segments returns the points of s as minutes since start, split where a value is not a number
// (a quantile of no observations, say): the line has a gap there, as Grafana draws it.
func segments(s Series, start time.Time) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for j, at := range s.Times {
		v := s.Values[j]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, plotter.XY{X: at.Sub(start).Minutes(), Y: v})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// panelColors are the lines' colours, one per series of a panel.
var panelColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// DrawDashboard draws panels, two a row, from what Prometheus p held from start to end, into a
// PNG file at out: each panel's series as lines over minutes since start, its title above.
func DrawDashboard(ctx context.Context, p *Prometheus, title string, panels []Panel, start, end time.Time, out string) error {
	step := end.Sub(start) / 120
	if step < time.Second {
		step = time.Second
	}
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, panel := range panels {
		pl := plot.New()
		pl.Title.Text = panel.Title
		pl.X.Label.Text = "minutes since " + start.UTC().Format("15:04:05") + " UTC"
		pl.Legend.Top = true
		pl.Add(plotter.NewGrid())
		n := 0
		for _, q := range panel.Queries {
			series, err := p.QueryRange(ctx, q.Expr, start, end, step)
			if err != nil {
				return err
			}
			sort.Slice(series, func(a, b int) bool { return legend(q.Legend, series[a].Labels) < legend(q.Legend, series[b].Labels) })
			for _, s := range series {
				for k, seg := range segments(s, start) {
					line, err := plotter.NewLine(seg)
					if err != nil {
						return err
					}
					line.Color = panelColors[n%len(panelColors)]
					line.Width = vg.Points(1.5)
					pl.Add(line)
					if k == 0 {
						pl.Legend.Add(legend(q.Legend, s.Labels), line)
					}
				}
				n++
			}
		}
		pl.X.Min, pl.X.Max = 0, end.Sub(start).Minutes()
		if pl.Y.Min > 0 {
			pl.Y.Min = 0
		}
		plots[i/cols][i%cols] = pl
	}
	img := vgimg.New(vg.Points(1200), vg.Points(float64(300*rows)+40))
	dc := draw.New(img)
	heading := draw.Crop(dc, 0, 0, dc.Max.Y-dc.Min.Y-vg.Points(30), 0)
	titleFont := plot.DefaultFont
	titleFont.Size = vg.Points(16)
	heading.FillText(draw.TextStyle{Color: color.Black, Font: titleFont, XAlign: draw.XCenter, Handler: plot.DefaultTextHandler},
		vg.Point{X: (dc.Max.X - dc.Min.X) / 2, Y: dc.Max.Y - vg.Points(22)}, title)
	body := draw.Crop(dc, 0, 0, 0, -vg.Points(40))
	canvases := plot.Align(plots, draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(20), PadY: vg.Points(20),
		PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}, body)
	for i := range plots {
		for j, pl := range plots[i] {
			if pl != nil {
				pl.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
