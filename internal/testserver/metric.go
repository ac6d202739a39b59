package testserver

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// Metric returns the value of the counter, gauge or histogram count named
// name whose labels include labels, or -1 if there is no such series.
func (n *Node) Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				return value(m)
			}
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}
