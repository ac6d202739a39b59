package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/rlserver/rlserver/rules"
)

// BlockStore holds the blocked identifiers behind /v1/blocks. The
// Config's Rules store serves them when it satisfies BlockStore (a
// shards.Store, a cluster node). Implementations are safe for concurrent
// use.
type BlockStore interface {
	SetBlock(b rules.Block, now int64) error
	Unblock(identifier string, now int64) (lifted bool, err error)
	ActiveBlocks(now int64) []rules.Block
}

func (a *api) routeBlocks(mux *http.ServeMux) {
	a.handle(mux, "GET /v1/blocks", "blocks_list", a.listBlocks)
	mux.Handle("/v1/blocks", methodNotAllowed("GET"))
	a.handle(mux, "PUT /v1/blocks/{type}/{value...}", "blocks_put", a.putBlock)
	a.handle(mux, "DELETE /v1/blocks/{type}/{value...}", "blocks_delete", a.deleteBlock)
	mux.Handle("/v1/blocks/{type}/{value...}", methodNotAllowed("PUT, DELETE"))
}

// blockJSON is one block as the API shows it.
type blockJSON struct {
	Identifier string `json:"identifier"`
	TTLMs      int64  `json:"ttl_ms"`
	Reason     string `json:"reason"`
	Rule       string `json:"rule,omitempty"` // the rule that made it; absent for one made by hand
}

// putBlockRequest is the body of PUT /v1/blocks/{type}/{value}.
type putBlockRequest struct {
	Seconds *int64 `json:"seconds"`
	Reason  string `json:"reason"`
}

// ErrNoBlock is DELETE /v1/blocks/...'s error for an identifier that is not
// blocked (404).
var ErrNoBlock = errors.New("the identifier is not blocked")

func (a *api) blocks(w http.ResponseWriter, r *http.Request, what string) BlockStore {
	if err := a.authorize(r, accessAdmin, what); err != nil {
		writeError(w, err)
		return nil
	}
	bs, _ := a.cfg.Rules.(BlockStore)
	if bs == nil {
		writeError(w, badRequest("", "blocks are not available on this server"))
	}
	return bs
}

// GET /v1/blocks: the blocks live now, by identifier (admin).
func (a *api) listBlocks(w http.ResponseWriter, r *http.Request) {
	bs := a.blocks(w, r, "listing blocks")
	if bs == nil {
		return
	}
	all := bs.ActiveBlocks(a.cfg.Clock())
	out := make([]blockJSON, 0, len(all))
	for _, b := range all {
		out = append(out, blockJSON{Identifier: b.Identifier, TTLMs: ceilMillis(int64(b.TTL)), Reason: b.Reason, Rule: b.Rule})
	}
	writeJSON(w, http.StatusOK, out)
}

// PUT /v1/blocks/{type}/{value} {"seconds": n, "reason": "..."}: block
// type=value for n seconds (admin); 200 with the block.
func (a *api) putBlock(w http.ResponseWriter, r *http.Request) {
	bs := a.blocks(w, r, "blocking an identifier")
	if bs == nil {
		return
	}
	var req putBlockRequest
	err := decode(w, r, &req)
	if err == nil && req.Seconds == nil {
		err = badRequest("seconds", "missing: want a whole number of seconds from 1 to 31622400 (366 days)")
	}
	now := a.cfg.Clock()
	var b rules.Block
	if err == nil {
		b, err = rules.NewBlock(r.PathValue("type")+"="+r.PathValue("value"), *req.Seconds, req.Reason, now)
		if errors.Is(err, rules.ErrInvalidBlock) {
			err = badRequest("", err.Error())
		}
	}
	if err == nil {
		err = bs.SetBlock(b, now)
	}
	if err == nil {
		err = a.sync(r.Context(), true)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.cfg.Logger.Info("identifier blocked", "identifier", b.Identifier, "seconds", *req.Seconds, "reason", b.Reason,
		"client", r.RemoteAddr, "via", "http")
	writeJSON(w, http.StatusOK, blockJSON{Identifier: b.Identifier, TTLMs: *req.Seconds * 1000, Reason: b.Reason})
}

// DELETE /v1/blocks/{type}/{value}: lift the block (admin); 204, or 404
// if the identifier was not blocked.
func (a *api) deleteBlock(w http.ResponseWriter, r *http.Request) {
	bs := a.blocks(w, r, "lifting a block")
	if bs == nil {
		return
	}
	id := r.PathValue("type") + "=" + r.PathValue("value")
	_, _, err := rules.ParseIdentifier(id)
	if err != nil {
		err = badRequest("", err.Error())
	}
	var lifted bool
	if err == nil {
		lifted, err = bs.Unblock(id, a.cfg.Clock())
	}
	if err == nil && !lifted {
		err = fmt.Errorf("%w: %q", ErrNoBlock, id)
	}
	if err == nil {
		err = a.sync(r.Context(), true)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.cfg.Logger.Info("identifier unblocked", "identifier", id, "client", r.RemoteAddr, "via", "http")
	w.WriteHeader(http.StatusNoContent)
}
