package nodes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Report is the part of GET /cluster the tools read.
type Report struct {
	Node   string            `json:"node"`
	OK     bool              `json:"ok"`
	Nodes  []ReportNode      `json:"nodes"`
	Groups []ReportGroup     `json:"groups"`
	Errors map[string]string `json:"errors,omitempty"`
}

// ReportNode is one member.
type ReportNode struct {
	Name  string `json:"name"`
	RESP  string `json:"resp"`
	Leads int    `json:"leads"`
}

// ReportGroup is one data group.
type ReportGroup struct {
	ID       int             `json:"id"`
	Slots    [2]int          `json:"slots"`
	Leader   string          `json:"leader"`
	Voters   []string        `json:"voters"`
	Replicas []ReportReplica `json:"replicas"`
}

// ReportReplica is one voter's copy of a group.
type ReportReplica struct {
	Node  string `json:"node"`
	State string `json:"state"`
	Ready bool   `json:"ready"`
	Term  uint64 `json:"term"`
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// GetReport reads GET /cluster from the node at httpAddr.
func GetReport(httpAddr string) (Report, error) {
	var r Report
	resp, err := httpClient.Get("http://" + httpAddr + "/cluster")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET /cluster: %s", resp.Status)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// Balanced reports whether every group has exactly one ready replica,
// its preferred leader (its first voter).
func (r Report) Balanced() bool {
	if !r.OK || len(r.Groups) == 0 {
		return false
	}
	for _, g := range r.Groups {
		ready := 0
		for _, rep := range g.Replicas {
			if rep.Ready {
				ready++
				if len(g.Voters) == 0 || rep.Node != g.Voters[0] {
					return false
				}
			}
		}
		if ready != 1 {
			return false
		}
	}
	return true
}

// ServedWithout reports whether every group has a ready replica on a
// node other than the one named dead.
func (r Report) ServedWithout(dead string) bool {
	if len(r.Groups) == 0 {
		return false
	}
	for _, g := range r.Groups {
		ok := false
		for _, rep := range g.Replicas {
			ok = ok || (rep.Ready && rep.Node != dead)
		}
		if !ok {
			return false
		}
	}
	return true
}

// MostLeader returns the name of the node leading the most groups.
func (r Report) MostLeader() (name string, leads int) {
	for _, n := range r.Nodes {
		if n.Leads > leads {
			name, leads = n.Name, n.Leads
		}
	}
	return name, leads
}

// GroupOf returns the group that holds slot, or nil.
func (r Report) GroupOf(slot int) *ReportGroup {
	for i := range r.Groups {
		if g := &r.Groups[i]; g.Slots[0] <= slot && slot <= g.Slots[1] {
			return g
		}
	}
	return nil
}

// WaitBalanced polls nd's GET /cluster until the cluster is Balanced, and
// returns the report then.
func WaitBalanced(nd *Node, d time.Duration) (Report, error) {
	deadline := time.Now().Add(d)
	for {
		r, err := GetReport(nd.HTTP)
		if err == nil && r.Balanced() {
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%w within %v (last report from %s: ok %v, %d groups; %v)", errNotBalanced, d, nd.Name, r.OK, len(r.Groups), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
