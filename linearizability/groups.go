package linearizability

import (
	"fmt"
	"sort"
)

// ownerKey names one partition of one group generation: the unit that at
// most one member may own.
type ownerKey struct {
	group      string
	generation int32
	tp         TP
}

// checkOwners reports a partition assigned to two members of a group in
// one generation (double_owner). As Kafka's group coordinator
// (GroupMetadataManager, ConsumerGroup for KIP-848), a generation's
// assignment comes from one leader's (or the coordinator's) plan that
// gives each partition to at most one member; members of different
// generations may believe they own a partition at once (a member that has
// not yet noticed a rebalance), which fencing by generation makes
// harmless, so only one generation's owners are compared. Only
// acknowledged assignments count: a member that received one owned it.
func checkOwners(h []Op, rp *reporter) {
	owners := map[ownerKey]map[string]int{} // -> member -> first op
	var keys []ownerKey
	for i := range h {
		o := &h[i]
		if o.Op != OpAssignment || o.Outcome != OutcomeOK {
			continue
		}
		for _, p := range o.Partitions {
			k := ownerKey{o.Group, *o.Generation, TP{o.Topic, p}}
			m := owners[k]
			if m == nil {
				m = map[string]int{}
				owners[k] = m
				keys = append(keys, k)
			}
			if _, ok := m[o.Member]; !ok {
				m[o.Member] = i
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.group != b.group {
			return a.group < b.group
		}
		if a.tp != b.tp {
			return a.tp.String() < b.tp.String()
		}
		return a.generation < b.generation
	})
	for _, k := range keys {
		m := owners[k]
		if len(m) < 2 {
			continue
		}
		members := make([]string, 0, len(m))
		for mem := range m {
			members = append(members, mem)
		}
		sort.Strings(members)
		ops := make([]int, 0, len(members))
		for _, mem := range members {
			ops = append(ops, m[mem])
		}
		sort.Ints(ops)
		rp.add(Anomaly{Kind: KindDoubleOwner, Key: k.group + "/" + k.tp.String(), Ops: ops,
			Detail: fmt.Sprintf("generation %d assigned the partition to %d members: %v", k.generation, len(members), members)})
	}
}
