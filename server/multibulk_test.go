package server

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"testing"
)

// millionArgs is the request of issue 18's front-door attack: RL.CHECK
// with 1,048,575 one-byte arguments, Redis's largest array (1024*1024
// elements), about 7.3 MB.
func millionArgs() []byte {
	var b bytes.Buffer
	b.Grow(maxMultibulk*7 + 32)
	b.WriteString("*" + itoa(maxMultibulk) + "\r\n$8\r\nRL.CHECK\r\n")
	for i := 1; i < maxMultibulk; i++ {
		b.WriteString("$1\r\na\r\n")
	}
	return b.Bytes()
}

// BenchmarkReaderMillionArgs parses the request of a million arguments
// as a connection receives it, 64 KiB per read, and lets go of what it
// grew, as a batch does.
func BenchmarkReaderMillionArgs(b *testing.B) {
	req := millionArgs()
	src := bytes.NewReader(nil)
	rd := reader{r: src, max: DefaultMaxRequest, budget: &budget{max: DefaultMaxBuffered}, buf: make([]byte, initialReadBuf)}
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		src.Reset(req)
		for {
			rd.reset()
			if err := rd.fill(); err != nil {
				b.Fatal(err)
			}
			args, err := rd.next()
			if err != nil {
				b.Fatal(err)
			}
			if args != nil {
				if len(args) != maxMultibulk {
					b.Fatalf("%d arguments", len(args))
				}
				rd.release()
				break
			}
			rd.release()
		}
	}
}

// TestLargeArraysAreReused: a request of a million arguments, parsed as a
// connection receives it, gives the same arguments every time, gives back
// all it took from the budget, and after the first time takes its large
// arrays (read buffer, offsets, arguments) from the spares instead of
// allocating them: a new 24 MB argument array cost the event loop page
// faults and garbage-collector assists (issue 18). A spare argument array
// holds no pointer into the read buffer it was used with.
func TestLargeArraysAreReused(t *testing.T) {
	req := millionArgs()
	b := &budget{max: DefaultMaxBuffered}
	src := bytes.NewReader(nil)
	rd := reader{r: src, max: DefaultMaxRequest, budget: b, buf: make([]byte, initialReadBuf)}
	parse := func() {
		t.Helper()
		src.Reset(req)
		for {
			rd.reset()
			if err := rd.fill(); err != nil {
				t.Fatal(err)
			}
			args, err := rd.next()
			if err != nil {
				t.Fatal(err)
			}
			if args == nil {
				rd.release()
				continue
			}
			if len(args) != maxMultibulk || string(args[0]) != "RL.CHECK" || string(args[1]) != "a" ||
				string(args[maxMultibulk-1]) != "a" || cap(args[1]) != 1 {
				t.Fatalf("%d arguments: %q %q ... %q", len(args), args[0], args[1], args[len(args)-1])
			}
			rd.release()
			if used := b.used.Load(); used != 0 {
				t.Fatalf("the budget holds %d bytes after the request", used)
			}
			return
		}
	}
	parse()
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop spares at random; the arguments and the budget were right")
	}
	// The collector is off: a collection drops spares (that is how an
	// attack's are let go), and this test is about their reuse. One P:
	// sync.Pool keeps an array per P that only that P finds, so that a
	// goroutine that moved to another P may miss it (and allocate).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	parse()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	parse()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("parsing the request again allocated %d MB; the first time's arrays should be reused", got>>20)
	}
	p, ok := b.spares.args[20].Get().(*[][]byte)
	if !ok {
		t.Fatal("no spare argument array of 2^20 elements after the request")
	}
	for i, a := range (*p)[:cap(*p)] {
		if a != nil {
			t.Fatalf("the spare argument array holds %q at %d", a, i)
		}
	}
}
