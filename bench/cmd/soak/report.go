package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlserver/rlserver/bench/chart"
	"github.com/rlserver/rlserver/bench/nodes"
)

// Summary is the result of a run.
type Summary struct {
	Name        string          `json:"name"`
	Duration    string          `json:"duration"`
	Load        string          `json:"load"`
	MaxMemory   int64           `json:"maxmemory"`
	PeakRSS     int64           `json:"peak_rss"`
	FinalRSS    int64           `json:"final_rss"`
	PeakUsed    int64           `json:"peak_used_memory"`
	Evicted     int64           `json:"evicted_keys"`
	Requests    int64           `json:"requests"`
	PerSecond   float64         `json:"requests_per_s"`
	FinalKeys   int64           `json:"final_keys"`
	Bystander   BystanderResult `json:"bystander"`
	CleanExit   bool            `json:"clean_exit"`
	Samples     []Sample        `json:"samples"`
	SecondHalfR [2]int64        `json:"rss_range_second_half"`
}

func summarize(o options, samples []Sample, by BystanderResult, srv *server) Summary {
	s := Summary{Name: o.name, Duration: o.d.String(), Bystander: by, Samples: samples,
		Load: fmt.Sprintf("redis-benchmark -c %d -P %d -r %d -l RL.CHECK key:__rand_int__ token 100 1h",
			o.clients, o.pipeline, o.keys)}
	if info, err := srv.info(); err == nil {
		s.MaxMemory, s.Evicted, s.FinalKeys = info["maxmemory"], info["evicted_keys"], info["keys"]
		s.Requests = info["total_commands_processed"] - s.Bystander.Checks*2
	}
	if rss, err := srv.rss(); err == nil {
		s.FinalRSS = rss
	}
	for i, smp := range samples {
		s.PeakRSS, s.PeakUsed = max(s.PeakRSS, smp.RSS), max(s.PeakUsed, smp.UsedMemory)
		if i >= len(samples)/2 {
			if s.SecondHalfR[0] == 0 || smp.RSS < s.SecondHalfR[0] {
				s.SecondHalfR[0] = smp.RSS
			}
			s.SecondHalfR[1] = max(s.SecondHalfR[1], smp.RSS)
		}
	}
	if len(samples) > 1 && samples[len(samples)-1].At > 0 {
		s.PerSecond = float64(s.Requests) / samples[len(samples)-1].At
	}
	return s
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

func (s Summary) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s of `%s` against `--maxmemory %s`\n\n", s.Name, s.Duration, s.Load, mb(s.MaxMemory))
	fmt.Fprintf(&b, "| | |\n|---|---:|\n")
	fmt.Fprintf(&b, "| peak RSS | %s |\n| RSS over the second half | %s to %s |\n| final RSS | %s |\n",
		mb(s.PeakRSS), mb(s.SecondHalfR[0]), mb(s.SecondHalfR[1]), mb(s.FinalRSS))
	fmt.Fprintf(&b, "| peak used_memory (state + connections) | %s |\n| keys evicted | %d |\n| keys at the end | %d |\n",
		mb(s.PeakUsed), s.Evicted, s.FinalKeys)
	fmt.Fprintf(&b, "| requests served | %d (%.0f per second) |\n", s.Requests, s.PerSecond)
	fmt.Fprintf(&b, "| bystander checks, exact | %d, %v |\n| bystander's longest wait | %.1f ms |\n",
		s.Bystander.Checks, s.Bystander.Exact, s.Bystander.WorstMs)
	fmt.Fprintf(&b, "| stopped cleanly on SIGTERM | %v |\n", s.CleanExit)
	if s.Bystander.FirstMiss != "" {
		fmt.Fprintf(&b, "\nFirst miss of the bystander: %s\n", s.Bystander.FirstMiss)
	}
	return b.String()
}

func (s Summary) write(o options) error {
	if err := nodes.WriteResults(o.out, o.name, s, s.markdown()); err != nil {
		return err
	}
	return nodes.WriteChart(filepath.Join(o.out, o.name+".png"), s.chart)
}

func (s Summary) chart(f *os.File) error {
	rss := chart.Series{Name: "RSS", Color: chart.Blue}
	used := chart.Series{Name: "used_memory (state + connections)", Color: chart.LightBlue}
	for _, smp := range s.Samples {
		rss.X, rss.Y = append(rss.X, smp.At), append(rss.Y, float64(smp.RSS))
		used.X, used.Y = append(used.X, smp.At), append(used.Y, float64(smp.UsedMemory))
	}
	notes := []string{s.Load, fmt.Sprintf("%d requests, %d keys evicted, bystander %d checks exact: %v, peak RSS %s",
		s.Requests, s.Evicted, s.Bystander.Checks, s.Bystander.Exact, mb(s.PeakRSS))}
	return chart.RenderLines(f, "rlserver "+s.Name+": memory under --maxmemory, "+s.Duration, notes, "s", "MB", 1e6,
		[]chart.Series{rss, used}, []chart.Mark{{Name: "maxmemory", Y: float64(s.MaxMemory), Color: chart.Red}})
}
