package metadata

import (
	"fmt"
	"math/rand"
	"slices"
)

// UsableBroker is a broker replicas may be placed on: registered and not in
// controlled shutdown (Kafka's UsableBroker). A fenced broker is usable, but
// only for replicas after the first.
type UsableBroker struct {
	ID     int32
	Rack   string // "" when the broker has none
	Fenced bool
}

// placementError is a placement failure; CreateTopics prefixes it with
// "Unable to replicate the partition N time(s): ", as Kafka does.
type placementError string

func (e placementError) Error() string { return string(e) }

// checkPlacement applies StripedReplicaPlacer.place's up-front checks, in
// its order, without placing anything.
func checkPlacement(brokers []UsableBroker, rf int) error {
	if rf <= 0 {
		return placementError(fmt.Sprintf("Invalid replication factor %d: the replication factor must be positive.", rf))
	}
	unfenced := 0
	for _, b := range brokers {
		if !b.Fenced {
			unfenced++
		}
	}
	if unfenced == 0 {
		return placementError("All brokers are currently fenced.")
	}
	if rf > len(brokers) {
		// Kafka 4.4's words, which name log directory cordoning (KIP-1066).
		return placementError(fmt.Sprintf("The target replication factor of %d cannot be reached because only %d broker(s) are registered or some brokers have all their log directories cordoned.", rf, len(brokers)))
	}
	return nil
}

// Place assigns replicas to n partitions as Kafka's StripedReplicaPlacer:
// racks are visited round robin from a random start, the first replica of
// each partition is an unfenced broker, later replicas come one per rack
// (unfenced brokers of a rack before its fenced ones), and each rack's
// broker list rotates per partition so leaders spread evenly; after every
// unfenced broker has led once, the rack and broker orders are reshuffled.
// The result is deterministic for a seeded r.
func Place(r *rand.Rand, brokers []UsableBroker, n, rf int) ([][]int32, error) {
	if err := checkPlacement(brokers, rf); err != nil {
		return nil, err
	}
	rl := newRackList(r, brokers)
	out := make([][]int32, 0, n)
	for range n {
		out = append(out, rl.place(rf))
	}
	return out, nil
}

// brokerList is StripedReplicaPlacer.BrokerList: a rotating view of one
// rack's brokers.
type brokerList struct {
	brokers              []int32
	index, offset, epoch int
}

func (l *brokerList) initialize(r *rand.Rand) {
	if len(l.brokers) > 0 {
		slices.Sort(l.brokers)
		l.offset = r.Intn(len(l.brokers))
	}
}

func (l *brokerList) shuffle(r *rand.Rand) {
	r.Shuffle(len(l.brokers), func(i, j int) { l.brokers[i], l.brokers[j] = l.brokers[j], l.brokers[i] })
}

// next returns the list's next broker in this epoch, or -1 when every
// broker has been returned in it. A new epoch restarts the list one
// position further on.
func (l *brokerList) next(epoch int) int32 {
	if len(l.brokers) == 0 {
		return -1
	}
	if l.epoch != epoch {
		l.epoch = epoch
		l.index = 0
		l.offset = (l.offset + 1) % len(l.brokers)
	}
	if l.index >= len(l.brokers) {
		return -1
	}
	b := l.brokers[(l.index+l.offset)%len(l.brokers)]
	l.index++
	return b
}

type rack struct{ fenced, unfenced brokerList }

func (k *rack) next(epoch int) int32 {
	if b := k.unfenced.next(epoch); b >= 0 {
		return b
	}
	return k.fenced.next(epoch)
}

// rackList is StripedReplicaPlacer.RackList.
type rackList struct {
	r             *rand.Rand
	racks         map[string]*rack
	names         []string
	unfenced      int
	epoch, offset int
}

func newRackList(r *rand.Rand, brokers []UsableBroker) *rackList {
	rl := &rackList{r: r, racks: map[string]*rack{}}
	for _, b := range brokers {
		k, ok := rl.racks[b.Rack]
		if !ok {
			k = &rack{}
			rl.racks[b.Rack] = k
			rl.names = append(rl.names, b.Rack)
		}
		if b.Fenced {
			k.fenced.brokers = append(k.fenced.brokers, b.ID)
		} else {
			k.unfenced.brokers = append(k.unfenced.brokers, b.ID)
			rl.unfenced++
		}
	}
	// Sorted before the random draws so a seed gives one placement
	// whatever order the brokers came in.
	slices.Sort(rl.names)
	for _, name := range rl.names {
		k := rl.racks[name]
		k.fenced.initialize(r)
		k.unfenced.initialize(r)
	}
	if len(rl.names) > 0 {
		rl.offset = r.Intn(len(rl.names))
	}
	return rl
}

func (rl *rackList) place(rf int) []int32 {
	if rl.epoch == rl.unfenced && rl.unfenced > 1 {
		rl.r.Shuffle(len(rl.names), func(i, j int) { rl.names[i], rl.names[j] = rl.names[j], rl.names[i] })
		for _, name := range rl.names {
			k := rl.racks[name]
			k.fenced.shuffle(rl.r)
			k.unfenced.shuffle(rl.r)
		}
		rl.epoch = 0
	}
	if rl.offset == len(rl.names) {
		rl.offset = 0
	}
	out := make([]int32, 0, rf)
	// The first replica (the leader) is the next unfenced broker of the
	// first rack that has one, starting at offset.
	first := rl.offset
	for {
		if b := rl.racks[rl.names[first]].unfenced.next(rl.epoch); b >= 0 {
			out = append(out, b)
			break
		}
		first = (first + 1) % len(rl.names)
	}
	// The others go one per rack, skipping the leader's rack once.
	idx := rl.offset
	for len(out) < rf {
		b := int32(-1)
		for b < 0 {
			if idx == first {
				first = -1
			} else {
				b = rl.racks[rl.names[idx]].next(rl.epoch)
			}
			idx = (idx + 1) % len(rl.names)
		}
		out = append(out, b)
	}
	rl.epoch++
	rl.offset++
	return out
}
