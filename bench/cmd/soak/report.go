package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/chart"
	"github.com/rlserver/rlserver/bench/nodes"
	"github.com/rlserver/rlserver/luaref"
)

// Summary is the result of a run.
type Summary struct {
	Name        string          `json:"name"`
	Mode        string          `json:"mode"`
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
	Redis       *RedisResult    `json:"redis,omitempty"`
}

// RedisResult is redis-server's run beside rlserver's: the same flood, as
// a Lua token bucket (EVALSHA), against the same maxmemory.
type RedisResult struct {
	Load      string  `json:"load"`
	PeakRSS   int64   `json:"peak_rss"`
	PeakUsed  int64   `json:"peak_used_memory"`
	Evicted   int64   `json:"evicted_keys"`
	Requests  int64   `json:"requests"`
	PerSecond float64 `json:"requests_per_s"`
}

// floodRedis runs the flood against a redis-server of its own and returns
// what it measured.
func floodRedis(o options, dir string) (RedisResult, error) {
	srv, err := startRedis(o, dir)
	if err != nil {
		return RedisResult{}, err
	}
	defer srv.stop()
	script, _ := luaref.Source("token")
	sha, err := srv.cli.Do("SCRIPT", "LOAD", script)
	if err != nil {
		return RedisResult{}, fmt.Errorf("redis-server: SCRIPT LOAD: %w", err)
	}
	now := strconv.FormatInt(time.Now().UnixMicro(), 10)
	cmd := []string{"EVALSHA", sha, "1", "key:__rand_int__", "100", "3600000000", now, "1", "0"}
	samples := srv.sample(o.interval)
	err = flood(o, srv.addr, cmd...)
	smp := samples.stop()
	r := RedisResult{Load: fmt.Sprintf("redis-benchmark -c %d -P %d -r %d -l %s (luaref's token.lua)", o.clients, o.pipeline, o.keys,
		strings.Join(cmd, " "))}
	for _, x := range smp {
		r.PeakRSS, r.PeakUsed = max(r.PeakRSS, x.RSS), max(r.PeakUsed, x.UsedMemory)
	}
	if info, ierr := srv.info(); ierr == nil {
		r.Evicted, r.Requests = info["evicted_keys"], info["total_commands_processed"]
	}
	if len(smp) > 1 && smp[len(smp)-1].At > 0 {
		r.PerSecond = float64(r.Requests) / smp[len(smp)-1].At
	}
	return r, err
}

func summarize(o options, samples []Sample, by BystanderResult, srv *server) Summary {
	s := Summary{Name: o.name, Mode: o.mode, Duration: o.d.String(), Bystander: by, Samples: samples,
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
	fmt.Fprintf(&b, "# %s: %s of `%s` against `--maxmemory %s`, %s\n\n", s.Name, s.Duration, s.Load, mb(s.MaxMemory), s.Mode)
	fmt.Fprintf(&b, "| | |\n|---|---:|\n")
	fmt.Fprintf(&b, "| peak RSS | %s |\n| RSS over the second half | %s to %s |\n| final RSS | %s |\n",
		mb(s.PeakRSS), mb(s.SecondHalfR[0]), mb(s.SecondHalfR[1]), mb(s.FinalRSS))
	fmt.Fprintf(&b, "| peak used_memory (state, connections, overhead) | %s |\n| keys evicted | %d |\n| keys at the end | %d |\n",
		mb(s.PeakUsed), s.Evicted, s.FinalKeys)
	fmt.Fprintf(&b, "| requests served | %d (%.0f per second) |\n", s.Requests, s.PerSecond)
	fmt.Fprintf(&b, "| bystander checks, exact | %d, %v |\n| bystander's longest wait | %.1f ms |\n",
		s.Bystander.Checks, s.Bystander.Exact, s.Bystander.WorstMs)
	fmt.Fprintf(&b, "| stopped cleanly on SIGTERM | %v |\n", s.CleanExit)
	if r := s.Redis; r != nil {
		fmt.Fprintf(&b, "\nBeside it, redis-server with `maxmemory %s` and `volatile-ttl`, no persistence, the same length of `%s`:\n\n",
			mb(s.MaxMemory), r.Load)
		fmt.Fprintf(&b, "| | |\n|---|---:|\n| peak RSS | %s (rlserver: %.2f×) |\n| peak used_memory | %s |\n| keys evicted | %d |\n| requests served | %d (%.0f per second; rlserver: %.2f×) |\n",
			mb(r.PeakRSS), float64(s.PeakRSS)/float64(max(r.PeakRSS, 1)), mb(r.PeakUsed), r.Evicted, r.Requests, r.PerSecond,
			s.PerSecond/max(r.PerSecond, 1))
	}
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
	used := chart.Series{Name: "used_memory (state, connections, overhead)", Color: chart.LightBlue}
	for _, smp := range s.Samples {
		rss.X, rss.Y = append(rss.X, smp.At), append(rss.Y, float64(smp.RSS))
		used.X, used.Y = append(used.X, smp.At), append(used.Y, float64(smp.UsedMemory))
	}
	notes := []string{s.Load, fmt.Sprintf("%d requests, %d keys evicted, bystander %d checks exact: %v, peak RSS %s",
		s.Requests, s.Evicted, s.Bystander.Checks, s.Bystander.Exact, mb(s.PeakRSS))}
	return chart.RenderLines(f, "rlserver "+s.Name+": memory under --maxmemory, "+s.Duration, notes, "s", "MB", 1e6,
		[]chart.Series{rss, used}, []chart.Mark{{Name: "maxmemory", Y: float64(s.MaxMemory), Color: chart.Red}})
}
