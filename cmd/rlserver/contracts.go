package main

import (
	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
)

// The interfaces the server finds by type assertion, checked at compile
// time: a method whose signature drifts would otherwise turn a feature off
// without a word.
var (
	_ server.Transactor    = (*shards.Store)(nil)
	_ server.Transactor    = (*cluster.Node)(nil)
	_ server.Transactor    = clusterNode{}
	_ server.Spanner       = clusterNode{}
	_ server.ExecForwarder = clusterNode{}
	_ cluster.Executor     = (*server.Server)(nil)
	_ server.Persistents   = (*shards.Store)(nil)
	_ server.Persistents   = clusterNode{}
	_ server.Persistents   = (*cluster.Node)(nil)
)
