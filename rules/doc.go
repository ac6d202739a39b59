// Package rules is rlserver's rule model: a rule names which requests it
// limits (a target path or prefix glob, a tier, a key type) and how
// (algorithm, limit, window, burst, shadow mode).
//
// The package validates rules field by field (ValidationError names the
// field and wraps a sentinel), decodes them strictly from JSON and YAML,
// holds them in an immutable, copy-on-write Set, matches a request against
// them and picks the most restrictive outcome (see Best). It imports only
// engine. It owns no state and takes no locks: shards.Store owns the rule
// table, so that rule changes travel the same path as counter changes.
package rules
