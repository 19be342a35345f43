// Package metrics owns the broker's Prometheus metrics: requests by API and
// version, errors by API and code, bytes in and out, open connections,
// request latency histograms (Produce and Fetch among them), and the
// per-partition log gauges and fetch session cache numbers collected at
// scrape time.
//
// Names follow Prometheus conventions under the cascade_ prefix rather than
// Kafka's JMX names, which do not map onto Prometheus labels.
//
// Use:
//
//	m := metrics.New(prometheus.NewRegistry())
//	m.Request(0, 9, elapsed)
//	m.Error(0, 10)
package metrics
