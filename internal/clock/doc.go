// Package clock is a node's decision clock: the time every check, log
// entry, block and sweep is measured on. The system's wall clock can step
// (NTP correcting a large error, an operator, a VM resumed, a bad time
// source); a limiter that decides on it freezes every key for as long as
// the clock stepped back, and lets a forward step expire a day's state at
// once. The decision clock does not step.
//
// The rule. The decision clock D runs on the process's monotonic clock,
// which never steps, and converges on the wall clock W at a bounded rate:
// over any stretch of e monotonic nanoseconds, D advances by e, plus a
// correction toward W of at most e/Slew (1%). While D and W agree, D is W
// exactly; after W steps by s, D keeps its pace and closes the gap at 1%
// of real time (an hour's step in 100 hours), running at 99% of real time
// after a step back and at 101% after a step forward. So a step back never
// freezes a key (a key of 10 a minute admits 9.9 a minute of real time),
// and a step forward never expires state early by more than 1% of the time
// that has passed. Fixed windows stay aligned to D's epoch, which differs
// from the wall clock's by the offset D-W while the gap closes.
//
// Across restarts the clock is carried by a Mark (the decision time, the
// wall clock and the machine's boot clock when it was taken), which
// rlserver keeps in the data directory. A node restarted on the same boot
// measures the time it was down on the boot clock (which counts suspend
// and never steps) and resumes as if it had run on: a wall clock that
// jumped while it was down is bounded as above. After a reboot the boot
// clock cannot measure the downtime, and the wall clock, shifted by the
// offset the mark recorded, is taken as it is. Either way the clock never
// resumes before the mark's decision time, and a node that leads a Raft
// group raises its clock (AtLeast) to the latest time its group has
// committed, so that it never decides before a time its state was written
// at.
//
// A Clock reads time only through its Source: tests give it a fake one.
package clock
