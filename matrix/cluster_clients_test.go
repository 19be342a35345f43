package matrix_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cascade-kafka/cascade/matrix"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// clientCell is one cell of the clients step: compared by status only, as
// TestMatrix compares targets.
type clientCell struct {
	Cell   string
	Status string
}

// stepClients runs matrix.ClusterScenarios through every selected client
// (by default every client of TestMatrix)
// with the cluster's seeds as the bootstrap, checks the recorded history
// (no acknowledged record lost or duplicated), and checks that the
// cluster spread each scenario topic's leaders over all its brokers.
func stepClients(ctx context.Context, t *testing.T, r *clusterRun) (any, error) {
	clients := matrix.SelectedClients(defaultClients())
	target := r.target + "-cluster"
	dir := t.TempDir()
	h, err := matrix.NewHistory(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	env := matrix.NewEnv(target, strings.Join(r.c.Seeds(), ","))
	env.Parallel = 2
	cells, infos := matrix.Run(ctx, env, clients, matrix.ClusterScenarios(), h, os.Stderr)
	if err := h.Close(); err != nil {
		return nil, err
	}
	checkHistory(t, target, filepath.Join(dir, "history.jsonl"))
	var out []clientCell
	for _, c := range cells {
		if c.Status != matrix.StatusPass {
			t.Logf("%s %s: %s: %s", c.Scenario, c.Client, c.Status, c.Detail)
		}
		out = append(out, clientCell{Cell: c.Scenario + " " + c.Client, Status: c.Status})
	}
	for c, info := range infos {
		t.Logf("%s: %s", c, info)
	}
	md, err := cluster.Metadata(ctx, r.c, nil, 0)
	if err != nil {
		return nil, err
	}
	spread := 0
	for _, tp := range md.Topics {
		if tp.Topic == nil || !strings.HasPrefix(*tp.Topic, "m-"+matrix.ClusterTopicPrefix) {
			continue
		}
		spread++
		leaders := map[int32]bool{}
		for _, p := range tp.Partitions {
			leaders[p.Leader] = true
		}
		if len(leaders) != len(r.c.BrokerIDs()) {
			return nil, fmt.Errorf("%s: partitions led by %v, not by every broker", *tp.Topic, leaders)
		}
	}
	if want := len(clients) * len(matrix.ClusterScenarios()); spread != want {
		return nil, fmt.Errorf("found %d scenario topics, want %d", spread, want)
	}
	return out, nil
}
