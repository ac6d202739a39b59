package server

// Snapshotter is implemented by a Limiter that keeps its state on disk
// (cluster.Node): BGSAVE asks it for a snapshot, LASTSAVE for the time of
// the last one.
type Snapshotter interface {
	// Snapshot writes a snapshot of the whole state and compacts the log;
	// it blocks until done.
	Snapshot() error
	// LastSnapshot returns the Unix time of the last snapshot this process
	// wrote, or 0.
	LastSnapshot() int64
}

func persistenceCommands() []*command {
	return []*command{
		{name: "bgsave", arity: -1, flags: []string{"admin", "noscript", "no_async_loading"}, group: "server",
			summary: "Write a snapshot of the whole state in the background and compact the log (admin user only when --admin-token is set)",
			args:    []argDoc{{name: "schedule", typ: "pure-token", token: "SCHEDULE", optional: true}}, handler: cmdBgsave},
		{name: "lastsave", arity: 1, flags: []string{"loading", "stale", "fast"}, group: "server",
			summary: "Return the Unix time of the last snapshot written by this process", handler: cmdLastsave},
	}
}

// BGSAVE [SCHEDULE]
func cmdBgsave(s *Server, c *conn, args [][]byte, now int64) {
	snap, ok := s.cfg.Limiter.(Snapshotter)
	switch {
	case len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "SCHEDULE")):
		c.writeError("ERR syntax error")
		return
	case !ok:
		c.writeError("ERR persistence is off (--data-dir is empty): there is nothing to save")
		return
	case s.cfg.AdminToken != "" && !c.admin:
		c.writeError("NOPERM this user has no permissions to run the 'bgsave' command (AUTH admin <admin-token> first)")
		return
	}
	s.log.Info("BGSAVE", "client", c.addr)
	go func() {
		if err := snap.Snapshot(); err != nil {
			s.log.Error("BGSAVE failed", "err", err)
		}
	}()
	c.writeStatus("Background saving started")
}

// LASTSAVE
func cmdLastsave(s *Server, c *conn, args [][]byte, now int64) {
	var at int64
	if snap, ok := s.cfg.Limiter.(Snapshotter); ok {
		at = snap.LastSnapshot()
	}
	c.writeInt(at)
}
