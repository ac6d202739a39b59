//go:build !linux

package main

import "github.com/rlserver/rlserver/internal/clock"

// readBoot returns an unknown boot: outside Linux a restarted node resumes
// its clock as after a reboot (internal/clock's Mark).
func readBoot() clock.Boot { return clock.Boot{} }
