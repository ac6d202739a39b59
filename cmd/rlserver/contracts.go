package main

import (
	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
)

// The interfaces the server, the HTTP API, the Envoy service and the status
// page find in a limiter by type assertion (or take as one), checked at
// compile time for each limiter this binary hands them: a method whose
// signature drifts would otherwise turn a feature off without a word (EXEC
// without its locks, a cluster without MOVED). An interface a type is not
// listed under is one it is not meant to have: *shards.Store keeps no log
// (Committer, Snapshotter), *cluster.Node is one node whose rules share its
// log (Cluster, Nudger, Spanner, Blocking, RuleCommitter), a cluster bounds
// memory per group and snapshots per group (MemoryBound, Snapshotter).

// The in-memory node (--data-dir ""): one *shards.Store.
var (
	_ limiter              = (*shards.Store)(nil)
	_ server.Limiter       = (*shards.Store)(nil)
	_ server.RuleStore     = (*shards.Store)(nil)
	_ server.Prefetcher    = (*shards.Store)(nil)
	_ server.HotKeySource  = (*shards.Store)(nil)
	_ server.MemoryBound   = (*shards.Store)(nil)
	_ server.Transactor    = (*shards.Store)(nil)
	_ server.Persistents   = (*shards.Store)(nil)
	_ server.BlockStore    = (*shards.Store)(nil)
	_ httpapi.Checker      = (*shards.Store)(nil)
	_ httpapi.RuleStore    = (*shards.Store)(nil)
	_ httpapi.HotKeySource = (*shards.Store)(nil)
	_ httpapi.BlockStore   = (*shards.Store)(nil)
	_ envoyrls.Limiter     = (*shards.Store)(nil)
	_ blockLister          = (*shards.Store)(nil)
)

// The durable standalone node: *cluster.Node.
var (
	_ limiter                    = (*cluster.Node)(nil)
	_ server.Limiter             = (*cluster.Node)(nil)
	_ server.RuleStore           = (*cluster.Node)(nil)
	_ server.Prefetcher          = (*cluster.Node)(nil)
	_ server.Committer           = (*cluster.Node)(nil)
	_ server.HotKeySource        = (*cluster.Node)(nil)
	_ server.MemoryBound         = (*cluster.Node)(nil)
	_ server.Transactor          = (*cluster.Node)(nil)
	_ server.Snapshotter         = (*cluster.Node)(nil)
	_ server.Persistents         = (*cluster.Node)(nil)
	_ server.PersistenceReporter = (*cluster.Node)(nil)
	_ server.BlockStore          = (*cluster.Node)(nil)
	_ httpapi.Checker            = (*cluster.Node)(nil)
	_ httpapi.RuleStore          = (*cluster.Node)(nil)
	_ httpapi.Durable            = (*cluster.Node)(nil)
	_ httpapi.HotKeySource       = (*cluster.Node)(nil)
	_ httpapi.BlockStore         = (*cluster.Node)(nil)
	_ envoyrls.Limiter           = (*cluster.Node)(nil)
	_ envoyrls.Durable           = (*cluster.Node)(nil)
	_ blockLister                = (*cluster.Node)(nil)
)

// A cluster node: *cluster.Cluster, which the server sees through
// clusterNode (adding the server's Cluster and Membership) and the HTTP API
// through httpChecker (keyed checks forwarded).
var (
	_ server.Limiter             = (*cluster.Cluster)(nil)
	_ server.RuleStore           = (*cluster.Cluster)(nil)
	_ server.RuleCommitter       = (*cluster.Cluster)(nil)
	_ server.Prefetcher          = (*cluster.Cluster)(nil)
	_ server.Committer           = (*cluster.Cluster)(nil)
	_ server.Blocking            = (*cluster.Cluster)(nil)
	_ server.HotKeySource        = (*cluster.Cluster)(nil)
	_ server.Nudger              = (*cluster.Cluster)(nil)
	_ server.Transactor          = (*cluster.Cluster)(nil)
	_ server.Spanner             = (*cluster.Cluster)(nil)
	_ server.ExecForwarder       = (*cluster.Cluster)(nil)
	_ server.Persistents         = (*cluster.Cluster)(nil)
	_ server.PersistenceReporter = (*cluster.Cluster)(nil)
	_ server.BlockStore          = (*cluster.Cluster)(nil)
	_ httpapi.RuleStore          = (*cluster.Cluster)(nil)
	_ httpapi.Durable            = (*cluster.Cluster)(nil)
	_ httpapi.HotKeySource       = (*cluster.Cluster)(nil)
	_ httpapi.BlockStore         = (*cluster.Cluster)(nil)
	_ envoyrls.Limiter           = (*cluster.Cluster)(nil)
	_ envoyrls.Durable           = (*cluster.Cluster)(nil)
	_ cluster.Executor           = (*server.Server)(nil)

	_ limiter                    = clusterNode{}
	_ server.Limiter             = clusterNode{}
	_ server.RuleStore           = clusterNode{}
	_ server.RuleCommitter       = clusterNode{}
	_ server.Prefetcher          = clusterNode{}
	_ server.Committer           = clusterNode{}
	_ server.Blocking            = clusterNode{}
	_ server.HotKeySource        = clusterNode{}
	_ server.Cluster             = clusterNode{}
	_ server.Nudger              = clusterNode{}
	_ server.Membership          = clusterNode{}
	_ server.Transactor          = clusterNode{}
	_ server.Spanner             = clusterNode{}
	_ server.ExecForwarder       = clusterNode{}
	_ server.Persistents         = clusterNode{}
	_ server.PersistenceReporter = clusterNode{}
	_ server.BlockStore          = clusterNode{}
	_ httpapi.Cluster            = clusterNode{}
	_ httpapi.RuleStore          = clusterNode{}
	_ httpapi.HotKeySource       = clusterNode{}
	_ httpapi.BlockStore         = clusterNode{}
	_ blockLister                = clusterNode{}

	_ httpapi.Checker      = httpChecker{}
	_ httpapi.HotKeySource = httpChecker{}
)
