package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnPeers carries the inter-broker requests of transactions to other
// brokers' client listeners, one connection per broker and channel:
// markers from a coordinator to partition leaders, and verifications from
// a partition leader to a transactional id's coordinator, as Kafka's
// TransactionMarkerChannelManager and AddPartitionsToTxnManager. The two
// channels are apart so that a slow coordinator does not hold up markers.
type txnPeers struct {
	markers  *ctlClient
	verifies *ctlClient
}

func newTxnPeers(self int32) txnPeers {
	id := strconv.Itoa(int(self))
	return txnPeers{markers: newCtlClient("cascade-txn-markers-"+id, 10*time.Second),
		verifies: newCtlClient("cascade-txn-verify-"+id, 10*time.Second)}
}

func (p txnPeers) close() {
	if p.markers != nil {
		p.markers.close()
		p.verifies.close()
	}
}

// brokerAddr returns the client listener address of live broker id.
func (n *clusterNode) brokerAddr(id int32) (string, error) {
	for _, b := range n.LiveBrokers() {
		if b.ID == id {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return "", fmt.Errorf("broker: node %d is not a live broker", id)
}

// WriteTxnMarkers implements handler.Cluster.
func (n *clusterNode) WriteTxnMarkers(ctx context.Context, id int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	addr, err := n.brokerAddr(id)
	if err != nil {
		return nil, err
	}
	resp, err := n.txnPeers.markers.do(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// AddPartitionsToTxn implements handler.Cluster.
func (n *clusterNode) AddPartitionsToTxn(ctx context.Context, id int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	addr, err := n.brokerAddr(id)
	if err != nil {
		return nil, err
	}
	resp, err := n.txnPeers.verifies.do(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AddPartitionsToTxnResponse), nil
}
