package nodes

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Machine describes the machine and the code a benchmark ran on, for the
// reports' machine tables: nproc, cpu, kernel, os, go, date and the
// rlserver commit (git describe), plus, for each tool name → binary in
// tools, what `<binary> --version` prints.
func Machine(tools map[string]string) map[string]string {
	m := map[string]string{
		"nproc": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version(),
		"os": runtime.GOOS + "/" + runtime.GOARCH, "date": time.Now().UTC().Format("2006-01-02 15:04 UTC"),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	for name, bin := range tools {
		if b, err := exec.Command(bin, "--version").Output(); err == nil {
			m[name] = strings.TrimSpace(string(b))
		}
	}
	if b, err := exec.Command("uname", "-r").Output(); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m["rlserver"] = strings.TrimSpace(string(b))
	}
	return m
}

// Median returns the median of v (0 for none); v is not changed.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
