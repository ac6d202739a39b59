package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/cluster"
)

// joinVia returns the cluster.ClusterConfig.Join of --join: it asks the
// member at cfg.Join, over RESP, to add this node (RL.CLUSTER.JOIN), after
// AUTH as admin (--admin-token) or as the default user (--requirepass),
// and returns the number of data groups. Nil without --join.
func joinVia(cfg Config) func(ctx context.Context, me cluster.NodeInfo) (int, error) {
	if cfg.Join == "" {
		return nil
	}
	return func(ctx context.Context, me cluster.NodeInfo) (int, error) {
		var auth []string
		switch {
		case cfg.AdminToken != "":
			auth = []string{"AUTH", "admin", cfg.AdminToken}
		case cfg.RequirePass != "":
			auth = []string{"AUTH", cfg.RequirePass}
		}
		cmd := []string{"RL.CLUSTER.JOIN", me.ID, me.Raft, me.RESP}
		if me.HTTP != "" {
			cmd = append(cmd, me.HTTP)
		}
		return respCall(ctx, cfg.Join, auth, cmd)
	}
}

// respCall sends auth (if any) and cmd to the RESP server at addr and
// returns cmd's integer reply.
func respCall(ctx context.Context, addr string, auth, cmd []string) (int, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(15 * time.Second))
	}
	var req strings.Builder
	for _, c := range [][]string{auth, cmd} {
		if len(c) == 0 {
			continue
		}
		fmt.Fprintf(&req, "*%d\r\n", len(c))
		for _, a := range c {
			fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := nc.Write([]byte(req.String())); err != nil {
		return 0, err
	}
	rd := bufio.NewReader(nc)
	if len(auth) > 0 {
		if line, err := rd.ReadString('\n'); err != nil {
			return 0, err
		} else if !strings.HasPrefix(line, "+OK") {
			return 0, fmt.Errorf("AUTH at %s: %s", addr, strings.TrimSpace(strings.TrimPrefix(line, "-")))
		}
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, ":"):
		return strconv.Atoi(line[1:])
	case strings.HasPrefix(line, "-"):
		return 0, errors.New(line[1:])
	}
	return 0, fmt.Errorf("%s answered %q to %s", addr, line, cmd[0])
}
