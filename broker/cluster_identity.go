package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/log"
)

// checkNodeIdentity refuses to start a cluster node on directories another
// cluster or another node wrote, as Kafka refuses a log dir whose
// meta.properties names another cluster.id or node.id: replaying another
// cluster's metadata log, or serving another node's partitions under this
// node's id, would corrupt both. Directories without meta.properties are
// new and take this node's identity when they are opened.
func checkNodeIdentity(bc *config.Broker, clusterID string) error {
	for _, dir := range bc.LogDirs {
		props, err := log.ReadMetaProperties(dir)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("broker: reading %s: %w", filepath.Join(dir, "meta.properties"), err)
		}
		file := filepath.Join(dir, "meta.properties")
		if got := props["cluster.id"]; got != clusterID {
			how := "cluster.id"
			if bc.ClusterID == "" {
				how = "derived from controller.quorum.voters, since cluster.id is not set"
			}
			return fmt.Errorf("broker: %s belongs to cluster %q, but this node's cluster id is %q (%s): the directory is another cluster's, or this node's cluster.id or controller.quorum.voters changed",
				file, got, clusterID, how)
		}
		if got := props["node.id"]; got != "" && got != strconv.Itoa(int(bc.NodeID)) {
			return fmt.Errorf("broker: %s belongs to node %s, but this node's node.id is %d", file, got, bc.NodeID)
		}
	}
	return nil
}
