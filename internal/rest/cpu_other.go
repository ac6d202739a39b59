//go:build !unix

package rest

import "time"

// processCPU reports no CPU time where getrusage is missing: the process
// then rests after After without a request.
func processCPU() time.Duration { return 0 }
