package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnPeers carries the inter-broker requests of transactions to other
// brokers' client listeners: markers from a coordinator to partition
// leaders, and verifications from a partition leader to a transactional
// id's coordinator, as Kafka's TransactionMarkerChannelManager and
// AddPartitionsToTxnManager. Each channel has its own connection to each
// broker, so that a broker slow to answer holds up only its own requests
// of that kind.
type txnPeers struct {
	clientID string
	dial     DialFunc

	mu       sync.Mutex
	markers  map[int32]*ctlClient
	verifies map[int32]*ctlClient
}

// txnPeerTimeout bounds one request to a peer.
const txnPeerTimeout = 10 * time.Second

func newTxnPeers(self int32, dial DialFunc) *txnPeers {
	return &txnPeers{clientID: "cascade-txn-" + strconv.Itoa(int(self)), dial: dial,
		markers: map[int32]*ctlClient{}, verifies: map[int32]*ctlClient{}}
}

// client returns the connection of one channel to broker id.
func (p *txnPeers) client(channel map[int32]*ctlClient, kind string, id int32) *ctlClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := channel[id]
	if c == nil {
		c = newCtlClient(p.clientID+"-"+kind, txnPeerTimeout, p.dial)
		channel[id] = c
	}
	return c
}

func (p *txnPeers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range []map[int32]*ctlClient{p.markers, p.verifies} {
		for _, c := range ch {
			c.close()
		}
	}
}

// brokerAddr returns the inter-broker listener address of live broker id.
func (n *clusterNode) brokerAddr(id int32) (string, error) {
	for _, b := range n.liveOn(n.bc.Cluster.InterBrokerListener) {
		if b.ID == id {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return "", fmt.Errorf("broker: node %d is not a live broker", id)
}

// sendTxn sends req on one channel to live broker id.
func (n *clusterNode) sendTxn(ctx context.Context, channel map[int32]*ctlClient, kind string, id int32, req kmsg.Request) (kmsg.Response, error) {
	addr, err := n.brokerAddr(id)
	if err != nil {
		return nil, err
	}
	return n.txnPeers.client(channel, kind, id).do(ctx, addr, req)
}

// WriteTxnMarkers implements handler.Cluster.
func (n *clusterNode) WriteTxnMarkers(ctx context.Context, id int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	resp, err := n.sendTxn(ctx, n.txnPeers.markers, "markers", id, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// AddPartitionsToTxn implements handler.Cluster.
func (n *clusterNode) AddPartitionsToTxn(ctx context.Context, id int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp, err := n.sendTxn(ctx, n.txnPeers.verifies, "verify", id, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AddPartitionsToTxnResponse), nil
}
