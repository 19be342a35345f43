package wire

import (
	"math/bits"
	"sync"
	"testing"
)

// Request frames are pooled in power-of-two size classes, so that a busy
// producer connection reuses a handful of buffers instead of allocating (and
// the garbage collector later sweeping) one per request. Only frames of APIs
// whose decoded requests hold no reference to the frame once the response is
// written are pooled (pooledFrame); frames above maxPooledFrame are
// allocated exactly and left to the collector, so one huge request does not
// pin its buffer in the pool.
const (
	minFrameClassShift = 10 // 1 KiB
	maxFrameClassShift = 22 // 4 MiB
	maxPooledFrame     = 1 << maxFrameClassShift
)

var framePools [maxFrameClassShift - minFrameClassShift + 1]sync.Pool

// poisonFrames makes releaseFrame overwrite every released buffer, so a test
// that reads request bytes after their release sees garbage instead of
// passing by luck. It is on in test binaries only (this package's and every
// package's that runs a Server, such as the broker's end-to-end tests).
var poisonFrames = testing.Testing()

// frameClass returns the index of the smallest class holding n bytes, or -1
// when n is above maxPooledFrame.
func frameClass(n int) int {
	if n > maxPooledFrame {
		return -1
	}
	if n <= 1<<minFrameClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minFrameClassShift
}

// getFrame returns a buffer of length n. Buffers up to maxPooledFrame come
// from the pool of their class; larger ones are allocated exactly and are
// dropped by releaseFrame.
func getFrame(n int) *[]byte {
	c := frameClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if p, ok := framePools[c].Get().(*[]byte); ok {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, 1<<(c+minFrameClassShift))
	return &b
}

// releaseFrame returns a buffer from getFrame to its pool. The caller must
// hold no reference into it afterwards. nil is ignored.
func releaseFrame(p *[]byte) { putFrame(p, poisonFrames) }

// putFrame returns a buffer to its pool, overwriting it first if poison is
// set. A buffer that no request or response ever referred to (one a frame
// outgrew while it was read) need not be poisoned.
func putFrame(p *[]byte, poison bool) {
	if p == nil {
		return
	}
	c := frameClass(cap(*p))
	if c < 0 || cap(*p) != 1<<(c+minFrameClassShift) {
		return // an exact-size large frame
	}
	if poison {
		b := (*p)[:cap(*p)]
		for i := range b {
			b[i] = 0xdb
		}
	}
	*p = (*p)[:0]
	framePools[c].Put(p)
}

// pooledFrame reports whether frames of api key are read into pooled
// buffers. Produce is the request that matters (95% of the bytes a
// producer-heavy broker allocates) and its handler copies the record sets
// into the log before it returns, so nothing decoded from the frame (kmsg
// decoding aliases byte fields, such as Records, to the frame) outlives the
// response. Other APIs may keep decoded byte fields (group member metadata,
// assignments), so their frames stay garbage-collected.
func pooledFrame(key int16) bool { return key == produceKey }
