// Package statuspage is rlserver's live status page: the figures behind
// GET /v1/stats (Stats, a JSON document) and the page at GET /status that
// plots them (Assets: one HTML file, its script and its style sheet,
// embedded in the binary, so that the page needs nothing from outside the
// node — it works on a machine with no internet).
//
// It keeps a ring of per-second samples of the check counters (Series),
// so that the page has the last minutes of history as soon as it opens,
// and puts together what its hooks report: the totals and per-rule counts
// of the RESP server, the hot keys and the blocks (when those hooks are
// set), and in a cluster every node, group, leader and replica, with each
// replica's lag behind its leader computed here. It imports nothing of
// rlserver's: cmd/rlserver wires the hooks to the concrete types, and
// httpapi serves the routes (with its authorization and request metrics).
//
// The page is computed by nothing but its script from the JSON: every
// figure it shows is a field of Stats.
package statuspage
