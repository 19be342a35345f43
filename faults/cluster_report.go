package faults

import (
	"fmt"
	"html"
	"slices"
	"sort"
	"strings"
	"time"
)

// ClusterResult is one cluster suite run on one target.
type ClusterResult struct {
	Target string
	// Seeds are the runs' seeds (one per run merged into the result).
	Seeds []uint64
	// Passed is the run's verdict: every history check clean, no stuck
	// client, the drain complete.
	Passed  bool
	Figures []FaultFigure
	// Notes say why a run failed, and what a repeated run of the
	// oracle's first failed: one line each, shown under the table.
	Notes []string
}

// RunNotes are the first lines of a run's failure reasons, at most a few
// and each cut short, as the report shows them.
func RunNotes(seed uint64, prefix string, reasons []string) []string {
	const most, width = 5, 240
	var out []string
	for i, r := range reasons {
		if i == most {
			out = append(out, fmt.Sprintf("seed %d: %s%d more", seed, prefix, len(reasons)-most))
			break
		}
		line, _, _ := strings.Cut(strings.TrimSpace(r), "\n")
		if len(line) > width {
			line = line[:width] + "…"
		}
		out = append(out, fmt.Sprintf("seed %d: %s%s", seed, prefix, line))
	}
	return out
}

// clusterColumns are the figures the report shows per fault and target.
var clusterColumns = []struct {
	name string
	of   func(FaultFigure) time.Duration
}{
	{"new leader", func(f FaultFigure) time.Duration { return f.NewLeader }},
	{"new controller", func(f FaultFigure) time.Duration { return f.NewControl }},
	{"first ack (partition)", func(f FaultFigure) time.Duration { return f.FirstAck }},
	{"ISR back after heal", func(f FaultFigure) time.Duration { return f.ISRBack }},
}

// faultCell is one fault's figures on one target.
type faultCell struct {
	runs   int
	values [][]time.Duration // by column
}

func cells(r ClusterResult) map[string]*faultCell {
	out := map[string]*faultCell{}
	for _, f := range r.Figures {
		c := out[f.Fault]
		if c == nil {
			c = &faultCell{values: make([][]time.Duration, len(clusterColumns))}
			out[f.Fault] = c
		}
		c.runs++
		for i, col := range clusterColumns {
			if d := col.of(f); d >= 0 {
				c.values[i] = append(c.values[i], d)
			}
		}
	}
	return out
}

// verdict is a fault's pass or fail on one target: the run's, whose
// checks judge the whole history and whose liveness bound holds every
// client after the final heal.
func (c *faultCell) verdict(r ClusterResult) string {
	switch {
	case c == nil:
		return "not applied"
	case !r.Passed:
		return "FAIL (run)"
	}
	return "pass"
}

// spread formats durations as "median / max" in seconds, "-" for none.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%.1f / %.1f", s[len(s)/2].Seconds(), s[len(s)-1].Seconds())
}

// faultNames lists the faults of every result, sorted by mode then role.
func faultNames(results []ClusterResult) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range results {
		for _, f := range r.Figures {
			if !seen[f.Fault] {
				seen[f.Fault] = true
				names = append(names, f.Fault)
			}
		}
	}
	sort.Strings(names)
	return names
}

// tableRow is one fault's cells: per target its verdict, whether it
// passed, and its figures.
type tableRow struct {
	fault   string
	targets []rowCells
}

type rowCells struct {
	verdict string
	class   string // pass, fail, na
	figures []string
}

// table lays out the faults × targets table.
func table(results []ClusterResult) []tableRow {
	all := make([]map[string]*faultCell, len(results))
	for i, r := range results {
		all[i] = cells(r)
	}
	var rows []tableRow
	for _, name := range faultNames(results) {
		row := tableRow{fault: name}
		for i, r := range results {
			c := all[i][name]
			rc := rowCells{verdict: c.verdict(r), class: "fail"}
			switch {
			case rc.verdict == "pass":
				rc.class = "pass"
			case c == nil:
				rc.class = "na"
			}
			for j := range clusterColumns {
				v := "-"
				if c != nil {
					v = spread(c.values[j])
				}
				rc.figures = append(rc.figures, v)
			}
			row.targets = append(row.targets, rc)
		}
		rows = append(rows, row)
	}
	return rows
}

// ClusterMarkdown is the faults × targets table: each target's verdict
// and figures (median / max seconds over the times the fault was
// applied).
func ClusterMarkdown(results []ClusterResult) string {
	var b strings.Builder
	b.WriteString("| fault |")
	for _, r := range results {
		fmt.Fprintf(&b, " %s |", r.Target)
		for _, col := range clusterColumns {
			fmt.Fprintf(&b, " %s (s) |", col.name)
		}
	}
	b.WriteString("\n| --- |")
	for range results {
		b.WriteString(" --- |" + strings.Repeat(" ---: |", len(clusterColumns)))
	}
	b.WriteString("\n")
	for _, row := range table(results) {
		fmt.Fprintf(&b, "| %s |", row.fault)
		for _, t := range row.targets {
			fmt.Fprintf(&b, " %s | %s |", t.verdict, strings.Join(t.figures, " | "))
		}
		b.WriteString("\n")
	}
	for _, r := range results {
		verdict := "passed"
		if !r.Passed {
			verdict = "FAILED"
		}
		fmt.Fprintf(&b, "\n%s: %s %s, %s.", r.Target, plural(len(r.Seeds), "seed", "seeds"), seedList(r.Seeds), verdict)
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "\n- %s", n)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// ClusterHTML is the same table as a page, verdicts coloured.
func ClusterHTML(results []ClusterResult) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><meta charset="utf-8"><title>Cluster fault suites</title>
<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td.l,th.l{text-align:left}.pass{background:#d9f2d9}.fail{background:#f7d0d0}.na{color:#999}</style>
<h1>Cluster fault suites</h1><p>Figures are median / max seconds over the times each fault was applied.</p><table><tr><th class=l rowspan=2>fault</th>`)
	for _, r := range results {
		fmt.Fprintf(&b, "<th colspan=%d>%s (%s %s)</th>", len(clusterColumns)+1, html.EscapeString(r.Target),
			plural(len(r.Seeds), "seed", "seeds"), seedList(r.Seeds))
	}
	b.WriteString("</tr><tr>")
	for range results {
		b.WriteString("<th>verdict</th>")
		for _, col := range clusterColumns {
			fmt.Fprintf(&b, "<th>%s</th>", col.name)
		}
	}
	b.WriteString("</tr>\n")
	for _, row := range table(results) {
		fmt.Fprintf(&b, "<tr><td class=l>%s</td>", html.EscapeString(row.fault))
		for _, t := range row.targets {
			fmt.Fprintf(&b, "<td class=%s>%s</td>", t.class, html.EscapeString(t.verdict))
			for _, v := range t.figures {
				fmt.Fprintf(&b, "<td>%s</td>", v)
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
	for _, r := range results {
		if len(r.Notes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "<p>%s:</p><ul>", html.EscapeString(r.Target))
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "<li>%s</li>", html.EscapeString(n))
		}
		b.WriteString("</ul>\n")
	}
	return b.String()
}

// MergeClusterResults merges the runs of each target into one result, in
// the order the targets first appear: their seeds and figures together,
// passed only when every run passed.
func MergeClusterResults(runs []ClusterResult) []ClusterResult {
	var out []ClusterResult
	at := map[string]int{}
	for _, r := range runs {
		i, ok := at[r.Target]
		if !ok {
			at[r.Target] = len(out)
			out = append(out, ClusterResult{Target: r.Target, Passed: true})
			i = len(out) - 1
		}
		m := &out[i]
		m.Seeds = append(m.Seeds, r.Seeds...)
		m.Figures = append(m.Figures, r.Figures...)
		m.Passed = m.Passed && r.Passed
		m.Notes = append(m.Notes, r.Notes...)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func seedList(seeds []uint64) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
