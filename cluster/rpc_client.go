package cluster

import (
	"context"
	"encoding/json"

	"github.com/rlserver/rlserver/cluster/transport"
)

// rpcClient makes this node's internal calls to another node: one method
// per call of the table in rpc.go, each encoding its request and decoding
// its answer. The heartbeat ticks (callPulse) are made by the pulse
// through its own caller, the same transport.Mux.Call.
//
// A method returns the transport's error as it is (a *transport.RemoteError
// for the callee's refusal, which the caller passes to remoteErr or logs),
// and an answer it cannot decode as a badReply whose text is the decoder's.
type rpcClient struct {
	mux *transport.Mux
}

// badReply is an answer that did not decode: the call ran on the callee.
type badReply struct{ err error }

func (e *badReply) Error() string { return e.err.Error() }
func (e *badReply) Unwrap() error { return e.err }

// call sends body to addr's method and decodes the answer into rep, if
// rep is not nil.
func (r rpcClient) call(ctx context.Context, addr, method string, body []byte, rep any) error {
	b, err := r.mux.Call(ctx, addr, method, body)
	if err != nil {
		return err
	}
	if rep != nil {
		if err := json.Unmarshal(b, rep); err != nil {
			return &badReply{err}
		}
	}
	return nil
}

// status asks addr for its nodeStatus (callStatus); with digest > 0, with
// its groups' digests at that time.
func (r rpcClient) status(ctx context.Context, addr string, digest int64) (nodeStatus, error) {
	var body []byte
	if digest != 0 {
		body, _ = json.Marshal(statusReq{Digest: digest})
	}
	var s nodeStatus
	err := r.call(ctx, addr, callStatus, body, &s)
	return s, err
}

// key runs a forwarded keyed command on addr (callKey).
func (r rpcClient) key(ctx context.Context, addr string, req keyReq) (keyReply, error) {
	body, _ := json.Marshal(req)
	var rep keyReply
	err := r.call(ctx, addr, callKey, body, &rep)
	return rep, err
}

// expect tells addr that the lead of req.Group is coming to it, and
// returns its refusal if it cannot take it now (callExpect).
func (r rpcClient) expect(ctx context.Context, addr string, req readyReq) error {
	body, _ := json.Marshal(req)
	return r.call(ctx, addr, callExpect, body, nil)
}

// ready returns once addr serves req.Group (callReady).
func (r rpcClient) ready(ctx context.Context, addr string, req readyReq) error {
	body, _ := json.Marshal(req)
	return r.call(ctx, addr, callReady, body, nil)
}

// hotKeys asks addr for its own hot keys (callHotKeys).
func (r rpcClient) hotKeys(ctx context.Context, addr string, req hotKeysReq) ([]hotKeyWire, error) {
	body, _ := json.Marshal(req)
	var rows []hotKeyWire
	err := r.call(ctx, addr, callHotKeys, body, &rows)
	return rows, err
}

// metaApply has the meta leader at addr apply cmd, an encoded meta.Cmd
// (callMetaApply).
func (r rpcClient) metaApply(ctx context.Context, addr string, cmd []byte) (metaReply, error) {
	var rep metaReply
	err := r.call(ctx, addr, callMetaApply, cmd, &rep)
	return rep, err
}

// metaJoin has the meta leader at addr add a node (callMetaJoin).
func (r rpcClient) metaJoin(ctx context.Context, addr string, req joinReq) (metaReply, error) {
	body, _ := json.Marshal(req)
	var rep metaReply
	err := r.call(ctx, addr, callMetaJoin, body, &rep)
	return rep, err
}

// metaLeave has the meta leader at addr remove a node (callMetaLeave).
func (r rpcClient) metaLeave(ctx context.Context, addr string, req leaveReq) (metaReply, error) {
	body, _ := json.Marshal(req)
	var rep metaReply
	err := r.call(ctx, addr, callMetaLeave, body, &rep)
	return rep, err
}

// charge charges a group's counters on its leader at addr (callCharge).
func (r rpcClient) charge(ctx context.Context, addr string, req chargeReq) (chargeReply, error) {
	body, _ := json.Marshal(req)
	var rep chargeReply
	err := r.call(ctx, addr, callCharge, body, &rep)
	return rep, err
}

// refund gives a charge back on the group's leader at addr (callRefund).
func (r rpcClient) refund(ctx context.Context, addr string, req chargeReq) error {
	body, _ := json.Marshal(req)
	return r.call(ctx, addr, callRefund, body, nil)
}
