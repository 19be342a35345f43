package bench

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestWriteHTML checks the report page: one bar per target scaled to the
// largest median, per-round values, ratios, failed runs marked, and
// target names escaped.
func TestWriteHTML(t *testing.T) {
	cpu := func(v float64) *float64 { return &v }
	runs := []RunResult{
		{Target: "cascade", Round: 1, ProduceRecordsPerS: 300, ConsumeRecordsPerS: 900, BrokerCPUSeconds: cpu(0.5), Verified: true},
		{Target: "cascade", Round: 2, ProduceRecordsPerS: 500, ConsumeRecordsPerS: 1100, BrokerCPUSeconds: cpu(0.7), Verified: true},
		{Target: "apache-kafka", Round: 1, ProduceRecordsPerS: 200, ConsumeRecordsPerS: 800, BrokerCPUSeconds: cpu(2), Verified: false},
		{Target: "<k>", Round: 1, ProduceRecordsPerS: 100, Error: "boom", Verified: false},
	}
	rep := &Report{Workload: DefaultWorkload(), Runs: runs}
	for _, name := range []string{"cascade", "apache-kafka"} {
		m, _ := median(name, runs)
		rep.Medians = append(rep.Medians, m)
	}
	rep.Ratios, _ = ratios(rep.Medians, nil)
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// Produce medians are 400 (cascade) and 200 (kafka): full and half bars.
	bars := regexp.MustCompile(`(?s)<h3>produce records/s.*?<h3>`).FindString(page)
	if !strings.Contains(bars, `width:100.0%`) || !strings.Contains(bars, `width:50.0%`) || !strings.Contains(bars, "300 / 500") {
		t.Errorf("produce chart: %s", bars)
	}
	for _, want := range []string{"<th>cascade/apache-kafka</th>", "<td>2.00x</td>", `class="bad"`, "&lt;k&gt;", "boom"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<k>") {
		t.Error("target name not escaped")
	}
}
