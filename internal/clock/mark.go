package clock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rlserver/rlserver/internal/durable"
)

// Boot identifies the machine's current boot and reads its boot clock
// (Linux: /proc/sys/kernel/random/boot_id and CLOCK_BOOTTIME, which counts
// suspend and never steps). An empty ID means the boot is not known, and
// a mark taken with it is resumed as after a reboot.
type Boot struct {
	ID     string
	Uptime int64 // ns since the boot
}

// Mark is what carries a Clock across a restart: the decision time and
// the wall clock when it was taken, and the boot and its clock then.
type Mark struct {
	Decided int64 // the decision time, ns since the Unix epoch
	Wall    int64 // the wall clock, ns since the Unix epoch
	Boot    Boot
}

// Offset returns the mark's decision time less its wall clock.
func (m Mark) Offset() int64 { return m.Decided - m.Wall }

// Mark returns the clock's mark now; boot is the boot, read at the same
// time.
func (c *Clock) Mark(boot Boot) Mark {
	d, w := c.Read()
	return Mark{Decided: d, Wall: w, Boot: boot}
}

// Resume sets the clock from m, taken by an earlier run of the node, with
// boot read now, and returns the decision time it resumed at.
//
// On the same boot the boot clock measures the time since the mark, and
// the clock resumes as if it had run on since (so a wall clock that jumped
// meanwhile moves it by at most 1% of that time). After a reboot, or with
// the boot unknown, it resumes at the wall clock shifted by the mark's
// offset. Never before the mark's decision time.
func (c *Clock) Resume(m Mark, boot Boot) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, mono := c.src.Read()
	d := resumeAt(m, boot, w)
	c.set(mono, d)
	return d
}

// resumeAt is the decision time Resume resumes at, with wall clock w.
func resumeAt(m Mark, boot Boot, w int64) int64 {
	var d int64
	if m.Boot.ID != "" && m.Boot.ID == boot.ID && boot.Uptime >= m.Boot.Uptime {
		d = decide(m.Boot.Uptime, m.Decided, boot.Uptime, w)
	} else {
		d = w + m.Offset()
	}
	return max(d, m.Decided)
}

// ErrBadMark is returned (wrapped) by Decode and Load for a mark file
// that does not decode, or of another version.
var ErrBadMark = errors.New("clock: not a clock mark of this version")

// markVersion is the version of the mark file's format.
const markVersion = 1

// markFile is the mark's JSON form.
type markFile struct {
	Version int    `json:"version"`
	Decided int64  `json:"decided_ns"`
	Wall    int64  `json:"wall_ns"`
	BootID  string `json:"boot_id,omitempty"`
	Uptime  int64  `json:"uptime_ns,omitempty"`
}

// Encode returns m's JSON form, versioned.
func Encode(m Mark) []byte {
	b, _ := json.Marshal(markFile{Version: markVersion, Decided: m.Decided, Wall: m.Wall, BootID: m.Boot.ID, Uptime: m.Boot.Uptime})
	return append(b, '\n')
}

// Decode decodes what Encode returned.
func Decode(b []byte) (Mark, error) {
	var f markFile
	if err := json.Unmarshal(b, &f); err != nil {
		return Mark{}, fmt.Errorf("%w: %v", ErrBadMark, err)
	}
	if f.Version != markVersion {
		return Mark{}, fmt.Errorf("%w: version %d", ErrBadMark, f.Version)
	}
	return Mark{Decided: f.Decided, Wall: f.Wall, Boot: Boot{ID: f.BootID, Uptime: f.Uptime}}, nil
}

// Load reads the mark at path; ok is false if there is no file.
func Load(path string) (m Mark, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Mark{}, false, nil
	}
	if err != nil {
		return Mark{}, false, err
	}
	m, err = Decode(b)
	if err != nil {
		return Mark{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return m, true, nil
}

// Save writes m to path durably: a temporary file, synced, renamed over
// path, and the directory synced.
func Save(path string, m Mark) error {
	return durable.WriteFile(vfs.Default, path, Encode(m))
}
