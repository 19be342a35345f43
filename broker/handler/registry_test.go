package handler

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRegistryWithinCodec checks that nothing is advertised beyond what the
// codec can decode and encode.
func TestRegistryWithinCodec(t *testing.T) {
	for _, a := range APIs() {
		req := kmsg.RequestForKey(a.Key)
		if req == nil {
			t.Fatalf("api %d unknown to kmsg", a.Key)
		}
		if a.Min < 0 || a.Min > a.Max || a.Max > req.MaxVersion() {
			t.Errorf("api %d (%s): range %d-%d, kmsg max %d", a.Key, kmsg.NameForKey(a.Key), a.Min, a.Max, req.MaxVersion())
		}
	}
}
