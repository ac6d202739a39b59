package main

import (
	"os"
	"strings"
	"syscall"
	"unsafe"

	"github.com/rlserver/rlserver/internal/clock"
)

// clockBoottime is Linux's CLOCK_BOOTTIME: time since the boot, suspend
// included; it never steps.
const clockBoottime = 7

// readBoot returns the machine's boot (its id, and its boot clock), which
// tells a restarted node how long it was down (internal/clock's Mark). A
// boot that cannot be read is unknown: the node then resumes as after a
// reboot.
func readBoot() clock.Boot {
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return clock.Boot{}
	}
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return clock.Boot{}
	}
	return clock.Boot{ID: strings.TrimSpace(string(id)), Uptime: ts.Nano()}
}
