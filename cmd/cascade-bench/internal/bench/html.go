package bench

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// WriteHTML writes the report as one self-contained HTML page: a bar per
// target for the headline metrics, the medians table with Cascade's
// ratios, the limits, and every run.
func WriteHTML(out io.Writer, rep *Report) error {
	return htmlPage.Execute(out, htmlView(rep))
}

type htmlBar struct {
	Target, Text string
	Pct          float64 // bar width, percent of the largest value
	Cascade      bool
	Rounds       string
}

type htmlChart struct {
	Name, Note string
	Bars       []htmlBar
}

type htmlRow struct {
	Name   string
	Cells  []string
	Ratios []string
}

type htmlData struct {
	Workload, Machine, Limits, OfLimits string
	Charts                              []htmlChart
	Head                                []string
	Rows                                []htmlRow
	Runs                                []RunResult
}

func htmlView(rep *Report) htmlData {
	d := htmlData{Workload: rep.Workload.String(), Limits: limitsText(rep), OfLimits: ofLimitsText(rep)}
	if m := rep.Machine; m.CPUs > 0 {
		d.Machine = fmt.Sprintf("%d CPUs, %s/%s, %s, started %s", m.CPUs, m.GOOS, m.GOARCH, m.GoVersion, m.Start)
		if m.LoadAvgStart != "" {
			d.Machine += fmt.Sprintf("; load average %s at start, %s at end", m.LoadAvgStart, m.LoadAvgEnd)
		}
	}
	d.Head = append(d.Head, "metric (median)")
	for _, m := range rep.Medians {
		d.Head = append(d.Head, fmt.Sprintf("%s (%d)", m.Target, m.Runs))
	}
	for _, r := range rep.Ratios {
		d.Head = append(d.Head, r.Of+"/"+r.To)
	}
	for _, mt := range summaryMetrics() {
		row := htmlRow{Name: mt.name}
		for _, m := range rep.Medians {
			row.Cells = append(row.Cells, mt.text(m))
		}
		for _, r := range rep.Ratios {
			row.Ratios = append(row.Ratios, mt.ratioText(r))
		}
		d.Rows = append(d.Rows, row)
		if mt.chart {
			d.Charts = append(d.Charts, chartOf(mt, rep))
		}
	}
	d.Runs = rep.Runs
	return d
}

// chartOf draws one metric's medians as bars scaled to the largest, with
// each target's per-round values beside it.
func chartOf(mt metric, rep *Report) htmlChart {
	c := htmlChart{Name: strings.TrimSpace(mt.name), Note: "higher is better"}
	if mt.lowerBetter {
		c.Note = "lower is better"
	}
	var top float64
	for _, m := range rep.Medians {
		if v, ok := mt.value(m); ok {
			top = max(top, v)
		}
	}
	for _, m := range rep.Medians {
		b := htmlBar{Target: m.Target, Text: mt.text(m), Cascade: m.Target == "cascade"}
		if v, ok := mt.value(m); ok && top > 0 {
			b.Pct = 100 * v / top
		}
		var rounds []string
		for _, r := range rep.Runs {
			if r.Target != m.Target || r.Error != "" {
				continue
			}
			// The median of one run is that run's figures.
			if one, ok := median(m.Target, []RunResult{r}); ok {
				rounds = append(rounds, mt.text(one))
			}
		}
		b.Rounds = strings.Join(rounds, " / ")
		c.Bars = append(c.Bars, b)
	}
	return c
}

var htmlPage = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>cascade-bench: {{.Workload}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:72em;color:#222}
h1{font-size:1.3em} h2{font-size:1.1em;margin-top:1.6em}
.chart{margin:1em 0}.chart h3{font-size:1em;margin:.2em 0}.note{color:#777;font-weight:normal;font-size:.85em}
.bar{display:flex;align-items:center;margin:2px 0}.bar .t{width:9em}.bar .track{flex:0 0 30em;background:#f2f2f2;height:1.2em;margin-right:.6em}
.bar .fill{height:100%;background:#9aa7b5}.bar.cascade .fill{background:#2f6fd0}.bar .v{width:8em;text-align:right;font-variant-numeric:tabular-nums}
.bar .r{white-space:nowrap;color:#777;font-size:.85em;padding-left:.6em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f6f6f6}td:first-child,th:first-child{text-align:left;white-space:pre}.bad{color:#b00020;font-weight:bold}
</style></head><body>
<h1>cascade-bench</h1>
<p>{{.Workload}}</p>{{if .Machine}}<p>{{.Machine}}</p>{{end}}
<h2>Medians</h2>
{{range .Charts}}<div class="chart"><h3>{{.Name}} <span class="note">({{.Note}}; rounds on the right)</span></h3>
{{range .Bars}}<div class="bar{{if .Cascade}} cascade{{end}}"><span class="t">{{.Target}}</span><span class="track"><div class="fill" style="width:{{printf "%.1f" .Pct}}%"></div></span><span class="v">{{.Text}}</span><span class="r">{{.Rounds}}</span></div>
{{end}}</div>
{{end}}
<table><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Name}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}{{range .Ratios}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{if .Limits}}<h2>Limits</h2><p>{{.Limits}}</p>{{if .OfLimits}}<p>{{.OfLimits}}</p>{{end}}{{end}}
<h2>Runs</h2>
<table><tr><th>target</th><th>round</th><th>produce rec/s</th><th>consume rec/s</th><th>ack p50 ms</th><th>ack p99 ms</th><th>ack max ms</th><th>broker CPU s</th><th>verified</th><th>error</th></tr>
{{range .Runs}}<tr><td>{{.Target}}</td><td>{{.Round}}</td><td>{{printf "%.0f" .ProduceRecordsPerS}}</td><td>{{printf "%.0f" .ConsumeRecordsPerS}}</td><td>{{printf "%.2f" .AckLatencyMs.P50}}</td><td>{{printf "%.2f" .AckLatencyMs.P99}}</td><td>{{printf "%.2f" .AckLatencyMs.Max}}</td><td>{{if .BrokerCPUSeconds}}{{printf "%.2f" .BrokerCPUSeconds}}{{else}}-{{end}}</td><td{{if not .Verified}} class="bad"{{end}}>{{.Verified}}</td><td>{{.Error}}</td></tr>
{{end}}</table>
</body></html>
`))
