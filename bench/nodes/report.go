package nodes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rlserver/rlserver/cluster"
)

var httpClient = &http.Client{Timeout: 2 * time.Second}

// GetReport reads GET /cluster from the node at httpAddr.
func GetReport(httpAddr string) (cluster.Report, error) {
	var r cluster.Report
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

// WaitBalanced polls nd's GET /cluster until the cluster is Balanced, and
// returns the report then.
func WaitBalanced(nd *Node, d time.Duration) (cluster.Report, error) {
	deadline := time.Now().Add(d)
	for {
		r, err := GetReport(nd.HTTP)
		if err == nil && r.IsBalanced() {
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%w within %v (last report from %s: ok %v, %d groups; %v)", errNotBalanced, d, nd.Name, r.OK, len(r.Groups), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
