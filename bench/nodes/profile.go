package nodes

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ProfileTop records a CPU profile of the Go process whose /debug/pprof is
// at pprofAddr over d (whole seconds, at least one), keeping it in raw
// until it returns, and returns go tool pprof's -top and -top -cum of it
// (nodecount functions each), read with the symbols of bin.
func ProfileTop(pprofAddr, bin string, d time.Duration, nodecount int, raw string) (string, error) {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(max(d, time.Second).Seconds()))
	if err := download(url, raw); err != nil {
		return "", fmt.Errorf("profile: %w", err)
	}
	defer os.Remove(raw)
	var out strings.Builder
	for _, mode := range [][]string{{"-top"}, {"-top", "-cum"}} {
		args := append([]string{"tool", "pprof"}, mode...)
		args = append(args, "-nodecount", fmt.Sprint(nodecount), bin, raw)
		b, err := exec.Command("go", args...).Output()
		if err != nil {
			return out.String(), fmt.Errorf("go tool pprof: %w", err)
		}
		out.Write(b)
		out.WriteString("\n")
	}
	return out.String(), nil
}

// download writes the body of GET url to path.
func download(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
