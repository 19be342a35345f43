package wire

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"go/format"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var rewriteAmplification = flag.Bool("rewrite", false, "rewrite amplification_gen.go from the measured worst cases")

// hostileElems is the array length the worst-case frames claim, and the
// number of zero bytes that follow the claim.
const hostileElems = 1 << 13

// hostileFrame is one crafted request body and what it attacks.
type hostileFrame struct {
	key, version int16
	path         string
	body         []byte
}

// hostileFrames crafts, for every array reachable in key's request at
// version, the frame that makes kmsg allocate the most per byte: the array
// claims as many elements as bytes remain (kmsg's only check) and zero bytes
// follow, so the decoder allocates the whole slice of structs before it finds
// that the elements are empty or missing. For flexible versions it also
// crafts a top-level tagged-field section of distinct unknown tags, which
// kmsg keeps in a map.
func hostileFrames(key, version int16) []hostileFrame {
	var out []hostileFrame
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	flexible := req.IsFlexible()
	for _, path := range slicePaths(reflect.TypeOf(req).Elem(), nil, 0) {
		a, b := buildWithPath(key, version, path, 3), buildWithPath(key, version, path, 4)
		if bytes.Equal(a, b) {
			continue // the field does not exist at this version
		}
		d := 0
		for d < len(a) && d < len(b) && a[d] == b[d] {
			d++
		}
		var body []byte
		if flexible {
			body = append(a[:d:d], binary.AppendUvarint(nil, hostileElems+1)...)
		} else {
			if d < 3 {
				continue
			}
			body = binary.BigEndian.AppendUint32(a[:d-3:d-3], hostileElems)
		}
		body = append(body, make([]byte, hostileElems)...)
		out = append(out, hostileFrame{key, version, pathName(reflect.TypeOf(req).Elem(), path), body})
		// A well-formed frame of empty elements, which kmsg's
		// per-element minimum size check lets through.
		if per := len(b) - len(a); per > 0 {
			out = append(out, hostileFrame{key, version, pathName(reflect.TypeOf(req).Elem(), path) + " (valid)",
				buildWithPath(key, version, path, hostileElems/per)})
		}
	}
	if flexible {
		enc := req.AppendTo(nil)
		body := append(enc[:len(enc)-1:len(enc)-1], binary.AppendUvarint(nil, hostileElems/3)...)
		for i := 0; i < hostileElems/3; i++ {
			body = binary.AppendUvarint(body, uint64(10000+i))
			body = append(body, 0)
		}
		out = append(out, hostileFrame{key, version, "tags", body})
	}
	return out
}

// slicePaths lists the field-index paths to every slice of structs or
// scalars reachable from t, descending through slices (one element) and
// nested structs.
func slicePaths(t reflect.Type, prefix []int, depth int) [][]int {
	if depth > 6 {
		return nil
	}
	var out [][]int
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "UnknownTags" {
			continue
		}
		p := append(append([]int(nil), prefix...), i)
		switch f.Type.Kind() {
		case reflect.Slice:
			if f.Type.Elem().Kind() == reflect.Uint8 {
				continue // bytes alias the frame
			}
			out = append(out, p)
			if f.Type.Elem().Kind() == reflect.Struct {
				out = append(out, slicePaths(f.Type.Elem(), p, depth+1)...)
			}
		case reflect.Struct:
			out = append(out, slicePaths(f.Type, p, depth+1)...)
		}
	}
	return out
}

func pathName(t reflect.Type, path []int) string {
	var names []string
	for _, i := range path {
		if t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		f := t.Field(i)
		names = append(names, f.Name)
		t = f.Type
	}
	return strings.Join(names, ".")
}

// buildWithPath encodes key's request at version with one element in every
// slice on path above the last and n zero elements in the last; nullable
// strings in the elements are set to "" so that decoding allocates them.
func buildWithPath(key, version int16, path []int, n int) []byte {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	v := reflect.ValueOf(req).Elem()
	for i, fi := range path {
		f := v.Field(fi)
		switch f.Kind() {
		case reflect.Slice:
			count := 1
			if i == len(path)-1 {
				count = n
			}
			s := reflect.MakeSlice(f.Type(), count, count)
			for j := 0; j < count; j++ {
				fillNullable(s.Index(j))
			}
			f.Set(s)
			v = s.Index(0)
		default:
			v = f
		}
	}
	return req.AppendTo(nil)
}

func fillNullable(v reflect.Value) {
	if v.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String && f.CanSet() {
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
}

// decodeAlloc returns the bytes allocated by copying body into a fresh frame
// buffer (as ReadFrame does) and decoding it with kmsg.
func decodeAlloc(key, version int16, body []byte) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	frame := make([]byte, len(body))
	copy(frame, body)
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	_ = req.ReadFrom(frame)
	runtime.KeepAlive(frame)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeAmplification measures, for every API key and version kmsg
// knows, the bytes that decoding the worst-case hostile frame allocates per
// frame byte, and fails if any exceeds the factor in amplification_gen.go
// that the server reserves from queued.max.request.bytes. Run with -rewrite
// to regenerate the table after a kmsg upgrade.
func TestDecodeAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("measures every api and version")
	}
	worst := map[int16]*[2]int{}
	worstPath := map[int16]string{}
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			for _, hf := range hostileFrames(key, v) {
				alloc := decodeAlloc(key, v, hf.body)
				// The reservation is frame × factor + ReservationSlack.
				amp := int((alloc + uint64(len(hf.body)) - 1) / uint64(len(hf.body)))
				if worst[key] == nil {
					worst[key] = &[2]int{1, 1}
				}
				fi := 0
				if req.IsFlexible() {
					fi = 1
				}
				if amp > worst[key][fi] {
					worst[key][fi] = amp
					worstPath[key] = fmt.Sprintf("v%d %s (%d B frame, %d B allocated)", v, hf.path, len(hf.body), alloc)
				}
				if int64(alloc) > Reservation(key, v, int32(len(hf.body))) {
					t.Errorf("%s v%d %s: %d B frame allocated %d B, more than its reservation %d",
						kmsg.NameForKey(key), v, hf.path, len(hf.body), alloc, Reservation(key, v, int32(len(hf.body))))
				}
			}
		}
	}
	keys := make([]int, 0, len(worst))
	for k := range worst {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	for _, k := range keys {
		t.Logf("%-28s %3dx %3dx  %s", kmsg.NameForKey(int16(k)), worst[int16(k)][0], worst[int16(k)][1], worstPath[int16(k)])
	}
	if *rewriteAmplification {
		var b strings.Builder
		b.WriteString("// Code generated by TestDecodeAmplification -rewrite; DO NOT EDIT.\n\npackage wire\n\n")
		b.WriteString("// decodeAmplification is, per API key, the most bytes decoding a\n// hostile frame of that key allocates per frame byte (frame buffer\n// included), rounded up, plus one for measurement noise: for its\n// non-flexible versions, then for its flexible versions.\n")
		b.WriteString("var decodeAmplification = map[int16][2]int{\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "\t%d: {%d, %d}, // %s\n", k, worst[int16(k)][0]+1, worst[int16(k)][1]+1, kmsg.NameForKey(int16(k)))
		}
		b.WriteString("}\n")
		src, err := format.Source([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("amplification_gen.go", src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSizeEstimateBoundsDecode checks that the scan the server sizes
// Produce and Metadata requests with is an upper bound of what kmsg really
// allocates, for every crafted frame it accepts, and that it accepts every
// well-formed one.
func TestSizeEstimateBoundsDecode(t *testing.T) {
	if testing.Short() {
		t.Skip("measures every version")
	}
	for _, key := range []int16{produceKey, metadataKey, listOffsetsKey, offsetCommitKey, joinGroupKey,
		syncGroupKey, createTopicsKey, txnOffsetCommitKey, describeConfigsKey} {
		req := kmsg.RequestForKey(key)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			for _, hf := range hostileFrames(key, v) {
				est, ok := sizeEstimate(key, v, hf.body)
				valid := req.ReadFrom(append([]byte(nil), hf.body...)) == nil
				if !ok {
					if valid {
						t.Errorf("%s v%d %s: kmsg decodes it but the scan refuses it", kmsg.NameForKey(key), v, hf.path)
					}
					continue
				}
				if alloc := decodeAlloc(key, v, hf.body); int64(alloc) > est {
					t.Errorf("%s v%d %s: estimated %d B, decoding allocated %d B", kmsg.NameForKey(key), v, hf.path, est, alloc)
				}
			}
		}
	}
}
