package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func httptestServer(t *testing.T, g *Group) string {
	s := httptest.NewServer(g.Handler())
	t.Cleanup(s.Close)
	return s.URL
}

func httpDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// kmsgReq encodes a request of key at version with one topic and
// partition where it has them.
func kmsgReq(t testing.TB, key, version int16) []byte {
	t.Helper()
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "t"
		pp := kmsg.NewProduceRequestTopicPartition()
		tp.Partitions = append(tp.Partitions, pp)
		r.Topics = append(r.Topics, tp)
		r.Acks = -1
	case *kmsg.FetchRequest:
		tp := kmsg.NewFetchRequestTopic()
		tp.Topic = "t"
		tp.Partitions = append(tp.Partitions, kmsg.NewFetchRequestTopicPartition())
		r.Topics = append(r.Topics, tp)
	case *kmsg.MetadataRequest:
		tp := kmsg.NewMetadataRequestTopic()
		s := "t"
		tp.Topic = &s
		r.Topics = append(r.Topics, tp)
	case *kmsg.OffsetFetchRequest:
		r.Group = "g"
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		r.Groups = append(r.Groups, g)
	}
	return req.AppendTo(nil)
}
