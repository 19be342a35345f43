package metadata

import (
	"encoding/hex"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/metadata/journal"
)

// TestSingleNodeJournalGolden pins the journal a fixed sequence of
// single-node operations writes, byte for byte, to what the Store wrote
// before topic planning moved into Planner and the cluster records were
// added: a single-node log stays readable by, and identical to, the
// binaries before them.
func TestSingleNodeJournalGolden(t *testing.T) {
	dir := t.TempDir()
	b, err := config.New(map[string]string{"num.partitions": "2"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir, Options{Broker: b, Rand: rand.New(rand.NewSource(5)), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.CreateTopics([]CreateTopic{{Name: "a", NumPartitions: -1, ReplicationFactor: -1, Configs: map[string]*string{"retention.ms": sp("9")}},
		{Name: "m", NumPartitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1}}, {1, []int32{1}}}}}, false) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, r := range st.CreatePartitions([]CreatePartitions{{Name: "a", Count: 4}, {Name: "m", Count: 3, Assignments: [][]int32{{1}}}}, false) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := st.IncrementalAlterTopicConfigs("a", []ConfigOp{{Name: "cleanup.policy", Op: OpAppend, Value: sp("compact")}, {Name: "retention.ms", Op: OpDelete}}, false); err != nil {
		t.Fatal(err)
	}
	if err := st.AlterTopicConfigs("m", map[string]*string{"segment.ms": sp("100")}, false); err != nil {
		t.Fatal(err)
	}
	if r := st.DeleteTopics([]DeleteTopic{{Name: "m"}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if _, err := st.NextProducerID(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	data, err := os.ReadFile(filepath.Join(dir, journal.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(data); got != singleNodeGolden {
		t.Fatalf("journal changed:\n got %s\nwant %s", got, singleNodeGolden)
	}
}

const singleNodeGolden = "" +
	"435343444d4a303100000030db77c7e602c800171677416b543443706a524d2d544c5a7373346f4c3632410c0012106d6574" +
	"61646174612e76657273696f6e320000006271bf7bc90402001201615af699815c184595aa804462a794f7510300185af699" +
	"815c184595aa804462a794f75100010201020200000300185af699815c184595aa804462a794f75102010201020200000400" +
	"130401610c726574656e74696f6e2e6d730101390000004cba51ccf503020012016d23135cc728c44daa9aa248d5a17dde49" +
	"03001823135cc728c44daa9aa248d5a17dde49000102010202000003001823135cc728c44daa9aa248d5a17dde4902010201" +
	"02020000000000378048c315020300185af699815c184595aa804462a794f75104010201020200000300185af699815c1845" +
	"95aa804462a794f75106010201020200000000001c76582ad20103001823135cc728c44daa9aa248d5a17dde490401020102" +
	"0200000000003aef2cd042020400110401610c726574656e74696f6e2e6d73000400220401610e636c65616e75702e706f6c" +
	"696379010e64656c6574652c636f6d706163740000001785d48c870104001304016d0a7365676d656e742e6d730103313030" +
	"000000148685349b0109001023135cc728c44daa9aa248d5a17dde4900000008acfcee1e010f00040200d00f"
