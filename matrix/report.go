package matrix

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// TargetReport is the <target>.json document of one target run.
type TargetReport struct {
	Target        string            `json:"target"`
	BrokerVersion string            `json:"broker_version"`
	Clients       map[string]string `json:"clients,omitempty"` // client id -> library and version
	Error         string            `json:"error,omitempty"`   // set when the target could not start
	History       string            `json:"history,omitempty"` // history file name in the report dir
	Cells         []Cell            `json:"cells"`
}

// Difference is a cell whose status differs between a target and its
// oracle (OracleOf: Apache Kafka, or the Apache Kafka cluster for the
// Cascade cluster).
type Difference struct {
	Key          string
	Scenario     string
	Client, Peer string
	Target       string
	Oracle       string
	OracleStatus string
	TargetStatus string
	OracleDetail string
	TargetDetail string
}

// Differences lists, for every report whose oracle (OracleOf) is among the
// reports, the cells whose status differs from the oracle's. A target
// whose oracle did not run has none.
func Differences(reports []TargetReport) []Difference {
	refs := map[string]map[string]Cell{}
	for _, r := range reports {
		if OracleOf(r.Target) != "" {
			continue
		}
		ref := map[string]Cell{}
		for _, c := range r.Cells {
			ref[c.Key()] = c
		}
		refs[r.Target] = ref
	}
	var out []Difference
	for _, r := range reports {
		oracle := OracleOf(r.Target)
		ref, ok := refs[oracle]
		if !ok {
			continue
		}
		for _, c := range r.Cells {
			o, ok := ref[c.Key()]
			if !ok || o.Status == c.Status || clientTiming(o.Status, c.Status) {
				continue
			}
			out = append(out, Difference{Key: c.Key(), Scenario: c.Scenario, Client: c.Client, Peer: c.Peer,
				Target: r.Target, Oracle: oracle, OracleStatus: o.Status, TargetStatus: c.Status, OracleDetail: o.Detail, TargetDetail: c.Detail})
		}
	}
	return out
}

// WriteReports writes <target>.json and <target>.md for every report and
// one index.html with all targets side by side, into dir.
func WriteReports(dir string, reports []TargetReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("matrix: report dir: %w", err)
	}
	diffs := Differences(reports)
	for _, r := range reports {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("matrix: encode %s report: %w", r.Target, err)
		}
		if err := os.WriteFile(filepath.Join(dir, r.Target+".json"), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("matrix: write report: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, r.Target+".md"), []byte(Markdown(r, diffs)), 0o644); err != nil {
			return fmt.Errorf("matrix: write report: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(HTML(reports, diffs)), 0o644); err != nil {
		return fmt.Errorf("matrix: write report: %w", err)
	}
	return nil
}

// grid arranges cells as rows (scenario, peer) by client columns.
type grid struct {
	clients []string
	rows    []string // "scenario|peer"
	cells   map[string]Cell
}

func newGrid(cells []Cell) grid {
	g := grid{cells: map[string]Cell{}}
	seenC, seenR := map[string]bool{}, map[string]bool{}
	for _, c := range cells {
		if !seenC[c.Client] {
			seenC[c.Client] = true
			g.clients = append(g.clients, c.Client)
		}
		row := c.Scenario + "|" + c.Peer
		if !seenR[row] {
			seenR[row] = true
			g.rows = append(g.rows, row)
		}
		g.cells[row+"|"+c.Client] = c
	}
	sort.Strings(g.clients)
	sort.Strings(g.rows)
	return g
}

func rowLabel(row string) string {
	s, peer, _ := strings.Cut(row, "|")
	if peer == "" {
		return s
	}
	return s + " → read by " + peer
}

// oracleName names an oracle target in a report's headings.
func oracleName(oracle string) string {
	if oracle == TargetApacheKafkaCluster {
		return "the Apache Kafka cluster"
	}
	return "Apache Kafka"
}

// clientTiming reports a pass on one target and a client-fault on the
// other: a known client defect that depends on the client's own timing
// (such as what its prefetch queue holds when it closes), not a broker
// difference.
func clientTiming(a, b string) bool {
	return (a == StatusPass && b == StatusClientFault) || (a == StatusClientFault && b == StatusPass)
}

func statusMark(status string) string {
	switch status {
	case StatusPass:
		return "✅ pass"
	case StatusFail:
		return "❌ fail"
	case StatusUnsupported:
		return "➖ unsupported"
	case StatusClientFault:
		return "⚠️ client-fault"
	}
	return status
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	return strings.ReplaceAll(s, "\n", " ")
}

// Markdown renders one target's report as a table, with the differences
// from Apache Kafka above it and failure details below.
func Markdown(r TargetReport, diffs []Difference) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Compatibility matrix: %s\n\nBroker: %s\n\n", r.Target, r.BrokerVersion)
	if r.Error != "" {
		fmt.Fprintf(&b, "**The target did not start:** %s\n\n", mdEscape(r.Error))
	}
	var mine []Difference
	for _, d := range diffs {
		if d.Target == r.Target {
			mine = append(mine, d)
		}
	}
	if oracle := OracleOf(r.Target); oracle != "" {
		name := oracleName(oracle)
		if len(mine) == 0 {
			fmt.Fprintf(&b, "No differences from %s.\n\n", name)
		} else {
			fmt.Fprintf(&b, "## Differences from %s (%d)\n\n", name, len(mine))
			for _, d := range mine {
				fmt.Fprintf(&b, "- `%s` %s: %s %s, %s %s: %s\n", rowLabel(d.Scenario+"|"+d.Peer), d.Client,
					d.Oracle, d.OracleStatus, r.Target, d.TargetStatus, mdEscape(firstLine(d.TargetDetail, 300)))
			}
			b.WriteString("\n")
		}
	}
	g := newGrid(r.Cells)
	b.WriteString("| scenario |")
	for _, c := range g.clients {
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString("\n|---|")
	for range g.clients {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var notes []string
	for _, row := range g.rows {
		fmt.Fprintf(&b, "| %s |", rowLabel(row))
		for _, c := range g.clients {
			cell, ok := g.cells[row+"|"+c]
			if !ok {
				b.WriteString(" |")
				continue
			}
			fmt.Fprintf(&b, " %s |", statusMark(cell.Status))
			if cell.Status != StatusPass || strings.HasPrefix(cell.Scenario, "4.") {
				notes = append(notes, fmt.Sprintf("- `%s` %s: %s", rowLabel(row), c, mdEscape(firstLine(cell.Detail, 400))))
			}
		}
		b.WriteString("\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n## Details\n\n" + strings.Join(notes, "\n") + "\n")
	}
	if len(r.Clients) > 0 {
		b.WriteString("\n## Clients\n\n")
		ids := make([]string, 0, len(r.Clients))
		for id := range r.Clients {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(&b, "- %s: %s\n", id, r.Clients[id])
		}
	}
	return b.String()
}

// HTML renders all targets side by side as one self-contained page: a
// coloured grid per (scenario, client) with one column per target, details
// on hover and on click, and the differences from Apache Kafka at the top.
func HTML(reports []TargetReport, diffs []Difference) string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><title>Cascade compatibility matrix</title><style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f2f2f2;position:sticky;top:0}
td.pass{background:#c8f0c8}td.fail{background:#f5b5b5}td.unsupported{background:#e4e4e4}td.client-fault{background:#f7e3a8}td.none{background:#fff}
td.cell{cursor:pointer;white-space:nowrap}td.diff{outline:3px solid #d08000;outline-offset:-3px}
.detail{display:none;white-space:pre-wrap;font-size:12px;max-width:40em}td.open .detail{display:block}
.diffs li{margin:.3em 0}code{background:#f4f4f4;padding:0 3px}
</style></head><body><h1>Cascade compatibility matrix</h1>`)
	b.WriteString("<p>Targets: ")
	for i, r := range reports {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "<b>%s</b> (%s)", html.EscapeString(r.Target), html.EscapeString(r.BrokerVersion))
		if r.Error != "" {
			fmt.Fprintf(&b, " <span style=\"color:#b00\">did not start: %s</span>", html.EscapeString(r.Error))
		}
	}
	b.WriteString(". Click a cell for details.</p>")

	fmt.Fprintf(&b, "<h2>Differences from Apache Kafka (%d)</h2>", len(diffs))
	if len(diffs) == 0 {
		b.WriteString("<p>None.</p>")
	} else {
		b.WriteString("<ul class=\"diffs\">")
		for _, d := range diffs {
			fmt.Fprintf(&b, "<li><code>%s</code> %s on <b>%s</b>: %s %s, %s %s — %s</li>",
				html.EscapeString(rowLabel(d.Scenario+"|"+d.Peer)), html.EscapeString(d.Client), html.EscapeString(d.Target),
				html.EscapeString(d.Oracle), d.OracleStatus, html.EscapeString(d.Target), d.TargetStatus, html.EscapeString(firstLine(d.TargetDetail, 400)))
		}
		b.WriteString("</ul>")
	}

	var all []Cell
	for _, r := range reports {
		all = append(all, r.Cells...)
	}
	g := newGrid(all)
	byTarget := map[string]map[string]Cell{}
	for _, r := range reports {
		m := map[string]Cell{}
		for _, c := range r.Cells {
			m[c.Key()] = c
		}
		byTarget[r.Target] = m
	}
	isDiff := map[string]bool{}
	for _, d := range diffs {
		isDiff[d.Target+"|"+d.Key] = true
	}
	b.WriteString("<h2>Grid</h2><table><tr><th rowspan=2>scenario</th>")
	for _, c := range g.clients {
		fmt.Fprintf(&b, "<th colspan=%d>%s</th>", len(reports), html.EscapeString(c))
	}
	b.WriteString("</tr><tr>")
	for range g.clients {
		for _, r := range reports {
			fmt.Fprintf(&b, "<th>%s</th>", html.EscapeString(r.Target))
		}
	}
	b.WriteString("</tr>")
	for _, row := range g.rows {
		fmt.Fprintf(&b, "<tr><td>%s</td>", html.EscapeString(rowLabel(row)))
		scen, peer, _ := strings.Cut(row, "|")
		for _, c := range g.clients {
			for _, r := range reports {
				key := scen + "|" + c + "|" + peer
				cell, ok := byTarget[r.Target][key]
				if !ok {
					b.WriteString(`<td class="none"></td>`)
					continue
				}
				cls := "cell " + cell.Status
				if isDiff[r.Target+"|"+key] {
					cls += " diff"
				}
				fmt.Fprintf(&b, `<td class="%s" title="%s" onclick="this.classList.toggle('open')">%s <small>%dms</small><div class="detail">%s</div></td>`,
					cls, html.EscapeString(cell.Detail), statusMark(cell.Status), cell.DurationMs, html.EscapeString(cell.Detail))
			}
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
	for _, r := range reports {
		if len(r.Clients) == 0 {
			continue
		}
		fmt.Fprintf(&b, "<h3>Clients on %s</h3><ul>", html.EscapeString(r.Target))
		ids := make([]string, 0, len(r.Clients))
		for id := range r.Clients {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(&b, "<li>%s: %s</li>", html.EscapeString(id), html.EscapeString(r.Clients[id]))
		}
		b.WriteString("</ul>")
	}
	b.WriteString("</body></html>\n")
	return b.String()
}
