package boundedfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestRead: a file within the bound is read whole; one above it is refused
// without being read (regular) or once the bound is passed (/dev/zero, an
// endless FIFO), holding no more than the bound; a FIFO with no writer
// reads as empty at once; a FIFO whose writer stalls is given up after
// the wait.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	os.WriteFile(small, []byte("- id: a\n"), 0o644)
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, bytes.Repeat([]byte("x"), 4097), 0o644)
	exact := filepath.Join(dir, "exact.yaml")
	os.WriteFile(exact, bytes.Repeat([]byte("y"), 4096), 0o644)

	if b, err := Read(small, 4096, time.Second); err != nil || string(b) != "- id: a\n" {
		t.Fatalf("small file: %q, %v", b, err)
	}
	if b, err := Read(exact, 4096, time.Second); err != nil || len(b) != 4096 {
		t.Fatalf("file of exactly the bound: %d bytes, %v", len(b), err)
	}
	if _, err := Read(big, 4096, time.Second); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("file over the bound: %v, want ErrTooLarge", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 4096, time.Second); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	if _, err := Read("/dev/zero", 1<<20, 5*time.Second); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("/dev/zero: %v, want ErrTooLarge", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 || time.Since(start) > 2*time.Second {
		t.Fatalf("/dev/zero with a 1 MiB bound allocated %d bytes in %s", grew, time.Since(start))
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if b, err := Read(fifo, 4096, 5*time.Second); err != nil || len(b) != 0 || time.Since(start) > time.Second {
		t.Fatalf("FIFO without a writer: %q, %v after %s; want it empty at once", b, err, time.Since(start))
	}

	// A writer that writes forever: refused at the bound.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// The writer's open waits for a reader; a reader that found no
		// writer yet and closed leaves it writing to nobody (EPIPE): it
		// opens the FIFO again, so that a later read finds it writing.
		chunk := bytes.Repeat([]byte("z"), 4096)
		for {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			for err == nil {
				select {
				case <-stop:
					w.Close()
					return
				default:
				}
				_, err = w.Write(chunk)
			}
			w.Close()
		}
	}()
	waitWriter(t, fifo, func() error {
		b, err := Read(fifo, 64<<10, 5*time.Second)
		switch {
		case errors.Is(err, ErrTooLarge):
			return nil
		case err == nil:
			return fmt.Errorf("read %d bytes and an end", len(b)) // before the writer opened it
		}
		return err
	})
}

// TestReadStalledFIFO: a FIFO whose writer opens it, writes a little and
// then neither writes nor closes is given up after the wait.
func TestReadStalledFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	opened := make(chan *os.File, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // waits for the reader
		if err != nil {
			opened <- nil
			return
		}
		w.Write([]byte("- id: a\n"))
		opened <- w
	}()
	var got error
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		_, err := Read(fifo, 4096, 300*time.Millisecond)
		if err != nil {
			got = err
			break
		}
		time.Sleep(10 * time.Millisecond) // the writer has not opened it yet: it read as empty
	}
	if w := <-opened; w != nil {
		defer w.Close()
	}
	if !errors.Is(got, ErrNoEnd) {
		t.Fatalf("stalled FIFO: %v, want ErrNoEnd", got)
	}
}

// waitWriter calls read until it returns nil (the writer had opened the
// FIFO), failing after a deadline with read's last error.
func waitWriter(t *testing.T, fifo string, read func() error) {
	t.Helper()
	if err := testutil.Poll(5*time.Second, read); err != nil {
		t.Fatalf("endless FIFO %s: %v, want ErrTooLarge", fifo, err)
	}
}
