package handler

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// filterCommitTopics keeps the topics and partitions of an OffsetCommit or
// a TxnOffsetCommit that exist in img and passes the others to refuse, as
// KafkaApis.handleOffsetCommitRequest and handleTxnOffsetCommitRequest
// check them before the group coordinator sees them: with useIDs (topics
// by id) an id img does not know is refused with UNKNOWN_TOPIC_ID for each
// of its partitions; without, a topic that does not exist is refused with
// UNKNOWN_TOPIC_OR_PARTITION; and at every version so is a partition the
// topic does not have. A nil img knows no topic. Each kept topic carries
// its name, resolved from its id with useIDs, and only its kept partitions;
// a topic left without partitions is dropped. fields gives a request
// topic's name, id and partitions, part a partition's index: they hide the
// two requests' types.
func filterCommitTopics[T, P any](img *metadata.Image, useIDs bool, topics []T,
	fields func(*T) (name *string, id [16]byte, parts *[]P), part func(*P) int32,
	refuse func(name string, id [16]byte, part int32, code int16), allowed func(name string) bool) []T {
	var kept []T
	for i := range topics {
		rt := topics[i]
		namep, id, partsp := fields(&rt)
		name, parts := *namep, *partsp
		var t *metadata.Topic
		ok := false
		switch {
		case img == nil:
		case useIDs:
			if t, ok = img.TopicByID(metadata.UUID(id)); ok {
				name = t.Name
			}
		default:
			t, ok = img.Topic(name)
		}
		// As KafkaApis: an unknown id, then READ on the topic (allowed,
		// nil without an authorizer), then an unknown name.
		if ok || !useIDs {
			if allowed != nil && !allowed(name) {
				for j := range parts {
					refuse(name, id, part(&parts[j]), kerr.TopicAuthorizationFailed.Code)
				}
				continue
			}
		}
		if !ok {
			code := kerr.UnknownTopicOrPartition.Code
			if useIDs {
				code = kerr.UnknownTopicID.Code
			}
			for j := range parts {
				refuse(name, id, part(&parts[j]), code)
			}
			continue
		}
		*namep, *partsp = name, nil
		for j := range parts {
			if n := part(&parts[j]); n < 0 || int(n) >= len(t.Partitions) {
				refuse(name, id, n, kerr.UnknownTopicOrPartition.Code)
				continue
			}
			*partsp = append(*partsp, parts[j])
		}
		if len(*partsp) > 0 {
			kept = append(kept, rt)
		}
	}
	return kept
}

// commitAnswer builds the topics of an OffsetCommit or TxnOffsetCommit
// response: one entry per topic, found by name, or by id where the version
// names topics by id, so that the refused partitions of a topic and the
// coordinator's answers for it share one entry, refused topics first (the
// responses' Builder.merge in Kafka).
type commitAnswer[T, P any] struct {
	topics   *[]T
	useIDs   bool
	index    map[commitTopicKey]int
	newTopic func(name string, id [16]byte) T
	fields   func(*T) (name string, id [16]byte, parts *[]P)
}

type commitTopicKey struct {
	name string
	id   [16]byte
}

// newCommitAnswer returns a commitAnswer appending to topics, which must
// be empty; newTopic makes a response topic and fields reads one.
func newCommitAnswer[T, P any](topics *[]T, useIDs bool, newTopic func(name string, id [16]byte) T,
	fields func(*T) (string, [16]byte, *[]P)) *commitAnswer[T, P] {
	return &commitAnswer[T, P]{topics: topics, useIDs: useIDs, index: map[commitTopicKey]int{}, newTopic: newTopic, fields: fields}
}

// add appends parts to the answer's topic of name (of id with useIDs).
func (a *commitAnswer[T, P]) add(name string, id [16]byte, parts ...P) {
	k := commitTopicKey{name: name}
	if a.useIDs {
		k = commitTopicKey{id: id}
	}
	i, ok := a.index[k]
	if !ok {
		i = len(*a.topics)
		a.index[k] = i
		*a.topics = append(*a.topics, a.newTopic(name, id))
	}
	_, _, ps := a.fields(&(*a.topics)[i])
	*ps = append(*ps, parts...)
}

// merge adds the coordinator's answers, topic by topic.
func (a *commitAnswer[T, P]) merge(from []T) {
	for i := range from {
		name, id, ps := a.fields(&from[i])
		a.add(name, id, *ps...)
	}
}

// throttledResponse is a response with a throttle time, as both commits'.
type throttledResponse interface {
	kmsg.Response
	Throttle() (int32, bool)
	SetThrottle(int32)
}

// finish returns a commit's answer once the coordinator answered its kept
// topics with coord, whose topics are coordTopics: coord itself, at the
// request's version, when nothing was refused; else resp, the refused
// topics followed by the coordinator's answers, with coord's throttle time.
func (a *commitAnswer[T, P]) finish(version int16, resp, coord throttledResponse, coordTopics []T) kmsg.Response {
	if len(*a.topics) == 0 {
		coord.SetVersion(version)
		return coord
	}
	throttle, _ := coord.Throttle()
	resp.SetThrottle(throttle)
	a.merge(coordTopics)
	return resp
}
