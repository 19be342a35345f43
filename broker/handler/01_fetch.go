package handler

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// Fetch: v4-18
//
// Kafka 4's floor is v4 (KIP-896).
//   - v4: IsolationLevel, LastStableOffset, AbortedTransactions (KIP-98)
//   - v5: LogStartOffset (KIP-107)
//   - v7: fetch sessions (KIP-227), see fetch_session.go
//   - v9: CurrentLeaderEpoch, FENCED/UNKNOWN_LEADER_EPOCH (KIP-320)
//   - v11: Rack, PreferredReadReplica (KIP-392): a consumer may read from
//     a follower, up to the follower's high watermark; a leader with a
//     replica.selector.class names the follower a consumer should read
//     from (replica_selector.go) and then answers that partition without
//     records, as Kafka's ReplicaManager.readFromLog
//   - v12: flexible; LastFetchedEpoch and DivergingEpoch (KIP-595)
//   - v13: topic ids instead of names (KIP-516), UNKNOWN_TOPIC_ID
//   - v15: ReplicaState replaces ReplicaID (KIP-903)
//   - v16: NodeEndpoints (KIP-951; sent only with a leader change)
//   - v17: ReplicaDirectoryID (KIP-853; followers only)
//   - v18: each partition's HighWatermark as the fetching follower knows
//     it (KIP-1166), so that a leader can answer a follower's long poll
//     when its high watermark moved; followers only, and Cascade's single
//     node has none, so the field is read and not used
//
// Record bytes are never copied through user space on a plaintext listener:
// the response is encoded around the log's file regions (fetch_encode.go).
func init() { register(1, 4, 18, handleFetch) }

// maxFetchResponseBytes is Kafka's fetch.max.bytes broker default (55 MiB),
// the cap on a response whatever the request asks for, used when the Env
// has no broker configuration.
const maxFetchResponseBytes = 55 << 20

// fetchMaxBytes returns the broker's fetch.max.bytes.
func fetchMaxBytes(env *Env) int {
	if env.Config == nil || env.Config.FetchMaxBytes <= 0 {
		return maxFetchResponseBytes
	}
	return int(env.Config.FetchMaxBytes)
}

// fetchPart is one partition of a fetch being served.
type fetchPart struct {
	cp    *cachedPartition
	topic string // resolved from the topic id from v13
	p     *partition.Partition
	code  int16
	// uncached is an incremental request's partition that does not exist
	// and so is answered without joining the session.
	uncached bool

	res       partition.ReadResult
	aborted   []log.AbortedTxn
	diverging *kmsg.FetchResponseTopicPartitionDivergingEpoch
	// preferred is the replica the leader sends the consumer to (KIP-392),
	// -1 for none; a partition with one is answered at once and unread.
	preferred int32
}

func (fp *fetchPart) release() {
	for _, r := range fp.res.Regions {
		r.Release()
	}
	fp.res.Regions = nil
}

// fetchResponse carries the encoded body with the message for tests.
type fetchResponse struct {
	*kmsg.FetchResponse
	body *fetchBody
}

func (f fetchResponse) wireBody() wire.Body { return f.body }

func handleFetch(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.FetchRequest)
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(r.Version)
	useIDs := r.Version >= 13

	key := func(topic string, id [16]byte, p int32) sessionKey {
		if useIDs {
			return sessionKey{id: id, partition: p}
		}
		return sessionKey{topic: topic, partition: p}
	}
	var wanted []cachedPartition
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			wanted = append(wanted, cachedPartition{
				key:                key(t.Topic, t.TopicID, p.Partition),
				fetchOffset:        p.FetchOffset,
				logStartOffset:     p.LogStartOffset,
				maxBytes:           p.PartitionMaxBytes,
				currentLeaderEpoch: p.CurrentLeaderEpoch,
				lastFetchedEpoch:   p.LastFetchedEpoch,
			})
		}
	}
	var forgotten []sessionKey
	for _, t := range r.ForgottenTopics {
		for _, p := range t.Partitions {
			forgotten = append(forgotten, key(t.Topic, t.TopicID, p))
		}
	}

	sessionID, sessionEpoch := r.SessionID, r.SessionEpoch
	if r.Version < 7 {
		sessionID, sessionEpoch = 0, finalEpoch
	}
	fctx := env.FetchSessions.open(sessionID, sessionEpoch, useIDs, wanted, forgotten, envCatalog{env})
	if fctx.errCode != 0 {
		resp.ErrorCode = fctx.errCode
		env.Metrics.Error(req.Key, fctx.errCode)
		return encodedFetch(resp, nil)
	}

	// The partitions to read, in the order they will be answered.
	var parts []*fetchPart
	if fctx.full {
		parts = make([]*fetchPart, len(wanted))
		for i := range wanted {
			parts[i] = &fetchPart{cp: &wanted[i]}
		}
	} else {
		env.FetchSessions.lock()
		parts = make([]*fetchPart, len(fctx.session.parts))
		for i, cp := range fctx.session.parts {
			c := *cp // read a copy; the session is updated after
			parts[i] = &fetchPart{cp: &c}
		}
		env.FetchSessions.unlock()
		for i := range fctx.uncached {
			parts = append(parts, &fetchPart{cp: &fctx.uncached[i], uncached: true})
		}
	}

	iso := partition.ReadHighWatermark
	if r.IsolationLevel == 1 {
		iso = partition.ReadCommitted
	}
	replicaID := fetchReplicaID(r)
	if replicaID >= 0 {
		// A follower reads to the log end offset (Kafka's
		// FetchIsolation.LOG_END); Cascade has none on a single node,
		// but a replica fetch must not see less than it asked for.
		iso = partition.ReadLogEnd
	}
	// As KafkaApis: from v11 a consumer's fetch carries client metadata
	// (its rack), which lets a follower serve it and the leader name a
	// preferred read replica (FetchParams.fetchOnlyLeader).
	consumer := replicaID < 0 && r.Version >= 11
	for _, fp := range parts {
		fp.resolve(env, req, replicaID >= 0, useIDs, consumer)
		if consumer && fp.code == 0 {
			fp.preferReplica(env, r.Rack)
		}
	}

	// As KafkaApis.handleFetchRequest: the response's limit is the
	// smaller of the request's max_bytes and the broker's fetch.max.bytes.
	maxBytes := int(r.MaxBytes)
	if limit := fetchMaxBytes(env); r.Version < 3 || maxBytes <= 0 || maxBytes > limit {
		maxBytes = limit
	}
	deadline := env.now().Add(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	waiter := partition.NewWaiter()
	defer func() {
		for _, fp := range parts {
			if fp.p != nil {
				fp.p.RemoveWaiter(waiter)
			}
		}
	}()
	recordFollower := replicaID >= 0
	for {
		for _, fp := range parts {
			if fp.p != nil && fp.code == 0 {
				fp.p.AddWaiter(waiter)
			}
		}
		total, stop := readParts(parts, maxBytes, iso)
		if replicaID >= 0 {
			// A follower's fetch moves the ISR's state (replica_fetch.go).
			stop = env.followerFetch(r, parts, recordFollower) || stop
			recordFollower = false
		}
		// As Kafka's ReplicaManager.fetchMessages: answer at once when
		// there is nothing to wait for, enough bytes, or any error.
		if stop || total >= int(r.MinBytes) || r.MaxWaitMillis <= 0 || len(parts) == 0 {
			break
		}
		wait := deadline.Sub(env.now())
		if wait <= 0 {
			break
		}
		timer := time.NewTimer(wait)
		select {
		case <-waiter.C:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			// The connection closed (or the broker is stopping):
			// nobody will read the answer, so the parked fetch is
			// dropped, as Kafka's purgatory drops the delayed
			// fetches of a closed connection.
			for _, fp := range parts {
				fp.release()
			}
			return nil, ctx.Err()
		}
		if !env.now().Before(deadline) {
			// Answer with what is there now, as a DelayedFetch
			// that expires re-reads before completing.
			for _, fp := range parts {
				fp.release()
			}
			readParts(parts, maxBytes, iso)
			break
		}
		for _, fp := range parts {
			fp.release()
		}
	}

	if fctx.full {
		return buildFullFetch(env, req, resp, parts, fctx)
	}
	return buildIncrementalFetch(env, req, resp, parts, fctx.session)
}

// fetchReplicaID is the fetching follower's broker id, negative for a
// consumer: ReplicaState from v15, ReplicaID before.
func fetchReplicaID(r *kmsg.FetchRequest) int32 {
	if r.Version >= 15 {
		return r.ReplicaState.ID
	}
	return r.ReplicaID
}

// resolve finds the partition and checks the request's leader epoch. A
// consumer's fetch with client metadata (v11+) may be served by any replica
// of the partition, a follower's and an older consumer's only by the
// leader, as Kafka's Partition.localLogWithEpochOrThrow.
func (fp *fetchPart) resolve(env *Env, req *Request, follower, useIDs, anyReplica bool) {
	k := fp.cp.key
	fp.topic = k.topic
	fp.preferred = -1
	if useIDs {
		name, ok := env.Partitions.TopicName(k.id)
		if !ok {
			fp.code = kerr.UnknownTopicID.Code
			return
		}
		fp.topic = name
	}
	if !env.fetchAllowed(req, follower, fp.topic) {
		fp.code = kerr.TopicAuthorizationFailed.Code
		return
	}
	fp.p = env.Partitions.Get(log.TopicPartition{Topic: fp.topic, Partition: k.partition})
	if code := env.replicaCode(fp.topic, k.partition, fp.p, anyReplica); code != 0 {
		fp.p, fp.code = nil, code
		return
	}
	fp.code = checkLeaderEpoch(fp.cp.currentLeaderEpoch, fp.p.LeaderEpoch())
}

// fetchAllowed is KafkaApis.handleFetchRequest's check, made after an
// unknown topic id and before existence: a follower needs CLUSTER_ACTION on
// the cluster, a consumer READ on the topic; either denial is
// TOPIC_AUTHORIZATION_FAILED on the partition.
func (env *Env) fetchAllowed(req *Request, follower bool, topic string) bool {
	if env.Authorizer == nil {
		return true
	}
	if follower {
		return env.authorizeCluster(req, acl.ClusterAction)
	}
	return env.authorizeTopic(req, acl.Read, topic)
}

// preferReplica asks the replica selector, on the leader, which replica the
// consumer in clientRack should read from; when it names a follower the
// partition is answered with it, the leader's offsets and no records, as
// Kafka's ReplicaManager.readFromLog skips the read.
func (fp *fetchPart) preferReplica(env *Env, clientRack string) {
	tp := log.TopicPartition{Topic: fp.topic, Partition: fp.cp.key.partition}
	id := env.preferredReadReplica(tp, fp.cp.fetchOffset, clientRack)
	if id < 0 {
		return
	}
	fp.preferred = id
	fp.res = partition.ReadResult{HighWatermark: fp.p.HighWatermark(), LastStableOffset: fp.p.LastStableOffset()}
	fp.res.LogStartOffset = fp.p.LogStartOffset()
}

// checkLeaderEpoch is Kafka's Partition.checkCurrentLeaderEpoch (KIP-320):
// -1 skips the check; an older epoch is fenced; a newer one is not known yet.
func checkLeaderEpoch(requested, current int32) int16 {
	switch {
	case requested == -1 || requested == current:
		return 0
	case requested < current:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}

// readParts reads every partition without an error, sharing maxBytes in
// order; the first partition to return data may exceed the limits by one
// batch (KIP-74). It returns the bytes read and whether an error (or
// divergence) asks for an immediate answer.
func readParts(parts []*fetchPart, maxBytes int, iso partition.Isolation) (int, bool) {
	total := 0
	stop := false
	for _, fp := range parts {
		if fp.preferred >= 0 {
			stop = true // as a fetch with a preferred read replica is answered at once
			continue
		}
		fp.aborted, fp.diverging = nil, nil
		if fp.p == nil || (fp.code != 0 && fp.code != kerr.OffsetOutOfRange.Code) {
			stop = stop || fp.code != 0
			continue
		}
		fp.code = 0
		if lfe := fp.cp.lastFetchedEpoch; lfe >= 0 {
			// KIP-595 divergence check, as Partition.readRecords.
			e, end := fp.p.EndOffsetForEpoch(lfe)
			if e < lfe || end < fp.cp.fetchOffset {
				fp.diverging = &kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: e, EndOffset: end}
				fp.res = partition.ReadResult{HighWatermark: fp.p.HighWatermark(), LastStableOffset: fp.p.LastStableOffset()}
				fp.res.LogStartOffset = fp.p.LogStartOffset()
				stop = true
				continue
			}
		}
		limit := min(int(fp.cp.maxBytes), maxBytes-total)
		if limit < 0 {
			limit = 0
		}
		res, err := fp.p.Read(fp.cp.fetchOffset, limit, iso, total == 0)
		if err != nil {
			fp.code = ErrorCode(err)
			stop = true
			continue
		}
		fp.res = res
		total += res.Size
		if iso == partition.ReadCommitted && res.Size > 0 {
			fp.aborted = fp.p.Log().AbortedTxns(fp.cp.fetchOffset, res.LastStableOffset)
		}
	}
	return total, stop
}

// partitionResponse fills one partition's response, Kafka's
// FetchPartitionData: on an error the offsets are -1 and records empty.
func (fp *fetchPart) partitionResponse(iso bool) kmsg.FetchResponseTopicPartition {
	pr := kmsg.NewFetchResponseTopicPartition()
	pr.Partition = fp.cp.key.partition
	pr.ErrorCode = fp.code
	pr.HighWatermark, pr.LastStableOffset, pr.LogStartOffset = -1, -1, -1
	if fp.code == 0 {
		pr.HighWatermark = fp.res.HighWatermark
		pr.LastStableOffset = fp.res.LastStableOffset
		pr.LogStartOffset = fp.res.LogStartOffset
		if iso && fp.res.Size > 0 {
			pr.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			for _, a := range fp.aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				pr.AbortedTransactions = append(pr.AbortedTransactions, at)
			}
		}
		if fp.diverging != nil {
			pr.DivergingEpoch = *fp.diverging
		}
		pr.PreferredReadReplica = fp.preferred
	}
	return pr
}

// appendPart adds fp to the response, grouping consecutive partitions of a
// topic as Kafka's FetchResponse.of does, and collects its regions.
func appendPart(resp *kmsg.FetchResponse, regions *[][][]log.Region, fp *fetchPart, iso bool) {
	k := fp.cp.key
	ts := resp.Topics
	if n := len(ts); n == 0 || ts[n-1].Topic != fp.topic || ts[n-1].TopicID != k.id {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = fp.topic, k.id
		resp.Topics = append(resp.Topics, t)
		*regions = append(*regions, nil)
	}
	t := &resp.Topics[len(resp.Topics)-1]
	t.Partitions = append(t.Partitions, fp.partitionResponse(iso))
	rs := &(*regions)[len(*regions)-1]
	*rs = append(*rs, fp.res.Regions)
	fp.res.Regions = nil // ownership moves to the body
}

func buildFullFetch(env *Env, req *Request, resp *kmsg.FetchResponse, parts []*fetchPart, fctx fetchContext) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.FetchRequest)
	iso := r.IsolationLevel == 1
	if env.Authorizer != nil {
		// Kafka answers the partitions it refused after the others
		// (KafkaApis.handleFetchRequest's erroneous).
		slices.SortStableFunc(parts, func(a, b *fetchPart) int {
			return cmp.Compare(denied(a), denied(b))
		})
	}
	var regions [][][]log.Region
	for _, fp := range parts {
		env.Metrics.Error(req.Key, fp.code)
		env.Metrics.FetchRecordBytes(fp.topic, fetchReplicaID(r) >= 0, fp.res.Size)
		appendPart(resp, &regions, fp, iso)
	}
	if fctx.create && resp.ErrorCode == 0 {
		resp.SessionID = createSession(env, r, parts, fctx.generation)
	}
	return encodedFetch(resp, regions)
}

// denied is 1 for a partition refused for authorization, else 0.
func denied(fp *fetchPart) int {
	if fp.code == kerr.TopicAuthorizationFailed.Code {
		return 1
	}
	return 0
}

// buildIncrementalFetch answers only the partitions with news, as Kafka's
// CachedPartition.maybeUpdateResponseData, and moves partitions that
// returned records to the end of the session so others get their turn.
func buildIncrementalFetch(env *Env, req *Request, resp *kmsg.FetchResponse, parts []*fetchPart, s *fetchSession) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.FetchRequest)
	iso := r.IsolationLevel == 1
	resp.SessionID = s.id
	var regions [][][]log.Region
	var moved []*cachedPartition
	env.FetchSessions.lock()
	if s.movedOn(r.SessionEpoch) {
		env.FetchSessions.unlock()
		for _, fp := range parts {
			fp.release()
		}
		resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		env.Metrics.Error(req.Key, resp.ErrorCode)
		return encodedFetch(resp, nil)
	}
	for _, fp := range parts {
		cp := s.index[fp.cp.key]
		if fp.uncached {
			env.Metrics.Error(req.Key, fp.code)
			appendPart(resp, &regions, fp, iso)
			continue
		}
		if cp == nil {
			fp.release() // forgotten by a concurrent request
			continue
		}
		hw, lso, start := fp.res.HighWatermark, fp.res.LastStableOffset, fp.res.LogStartOffset
		if fp.code != 0 {
			hw, lso, start = -1, -1, -1
		}
		must := fp.code != 0 || fp.res.Size > 0 || fp.diverging != nil || fp.preferred >= 0 ||
			hw != cp.hw || lso != cp.lso || start != cp.startOffset
		if !must {
			fp.release()
			continue
		}
		cp.hw, cp.lso, cp.startOffset = hw, lso, start
		if fp.res.Size > 0 {
			moved = append(moved, cp)
		}
		env.Metrics.Error(req.Key, fp.code)
		env.Metrics.FetchRecordBytes(fp.topic, fetchReplicaID(r) >= 0, fp.res.Size)
		appendPart(resp, &regions, fp, iso)
	}
	s.moveToEnd(moved...)
	env.FetchSessions.unlock()
	return encodedFetch(resp, regions)
}

func encodedFetch(resp *kmsg.FetchResponse, regions [][][]log.Region) (kmsg.Response, error) {
	body, err := encodeFetchResponse(resp, regions)
	if err != nil {
		return nil, errors.Join(errors.New("handler: encoding fetch response"), err)
	}
	return fetchResponse{FetchResponse: resp, body: body}, nil
}
