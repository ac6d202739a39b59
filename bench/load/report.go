package load

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes results as an aligned text table.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cluster := false
	for _, r := range results {
		cluster = cluster || r.Cluster != nil
	}
	head := "name\tconns\tpipeline\trequests\trps\tp50 µs\tp99 µs\tp99.9 µs\tmax µs\tdenied\terrors\t"
	if cluster {
		head += "nodes\tredirects\ttryagain\tclusterdown\tconn errors\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t", r.Name, r.Conns, r.Pipeline,
			r.Requests, r.RPS, r.Latency.P50, r.Latency.P99, r.Latency.P999, r.Latency.Max, r.Denied, r.Errors)
		if c := r.Cluster; c != nil {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t", len(c.Nodes), c.Redirects, c.TryAgain, c.ClusterDown, c.ConnErrors)
		} else if cluster {
			fmt.Fprint(tw, "\t\t\t\t\t")
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s: first error: %s\n", r.Name, r.FirstError)
		}
		if len(r.Commands) > 0 {
			fmt.Fprintf(w, "%s: %s\n", r.Name, strings.Join(r.Commands, " | "))
		}
	}
	return nil
}
