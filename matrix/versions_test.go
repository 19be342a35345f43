package matrix

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cascade-kafka/cascade/faults/proxy"
)

func TestVersionToxicRecordsMaxPerKey(t *testing.T) {
	rec := &versionRecorder{max: map[int16]int16{}}
	recordersMu.Lock()
	recorders["unit"] = rec
	recordersMu.Unlock()
	t.Cleanup(func() {
		recordersMu.Lock()
		delete(recorders, "unit")
		recordersMu.Unlock()
	})

	// The proxy accepts the toxic type with its attributes.
	g := proxy.NewGroup(proxy.Options{})
	defer g.Close()
	p, err := g.Add("unit", "127.0.0.1:0", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := json.Marshal(map[string]any{"api_key": -1, "recorder": "unit"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddToxic(proxy.ToxicSpec{Name: "v", Type: versionToxicType, Stream: "upstream", Toxicity: 1, Attributes: attrs}); err != nil {
		t.Fatal(err)
	}

	tx := &versionToxic{Match: proxy.Match{APIKey: -1}, Recorder: "unit"}
	for _, r := range []proxy.Request{{Key: 0, Version: 9}, {Key: 0, Version: 11}, {Key: 0, Version: 7}, {Key: 18, Version: 4}} {
		if a := tx.Act(&r); a != (proxy.Action{}) {
			t.Fatalf("Act changed traffic: %+v", a)
		}
	}
	// A toxic whose recorder is gone forwards without recording.
	(&versionToxic{Recorder: "gone"}).Act(&proxy.Request{Key: 1, Version: 1})
	if got, want := rec.snapshot(), map[int16]int16{0: 11, 18: 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
}
