package log

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Names of Kafka's log-dir and partition-dir files.
const (
	recoveryPointFile  = "recovery-point-offset-checkpoint"
	highWatermarkFile  = "replication-offset-checkpoint"
	logStartOffsetFile = "log-start-offset-checkpoint"
	metaPropertiesFile = "meta.properties"
	cleanShutdownFile  = ".kafka_cleanshutdown"
	leaderEpochFile    = "leader-epoch-checkpoint"
	partitionMetaFile  = "partition.metadata"
)

// writeFileAtomic writes data to path through a temporary file, fsyncs it,
// renames it into place and fsyncs the directory, as Kafka's
// CheckpointFileWithFailureHandler does.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory so a created, renamed or removed entry is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkpointLines parses Kafka's CheckpointFile text format: a version line
// (0), a count line, then count entry lines. As CheckpointReadBuffer, a
// file that ends before the count line holds no entries.
func checkpointLines(data []byte) ([]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) == 0 {
		return nil, nil
	}
	if strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("checkpoint: unsupported version %q", lines[0])
	}
	if len(lines) == 1 {
		return nil, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("checkpoint: count %q does not match %d entries", lines[1], len(lines)-2)
	}
	return lines[2:], nil
}

// readOffsetCheckpoint reads an OffsetCheckpointFile: lines of
// "topic partition offset". A missing file is an empty map.
func readOffsetCheckpoint(path string) (map[TopicPartition]int64, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	lines, err := checkpointLines(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[TopicPartition]int64, len(lines))
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: malformed line %q", path, l)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: malformed line %q", path, l)
		}
		out[TopicPartition{Topic: f[0], Partition: int32(p)}] = o
	}
	return out, nil
}

func writeOffsetCheckpoint(path string, m map[TopicPartition]int64) error {
	tps := make([]TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	return writeFileAtomic(path, b.Bytes())
}

// epochEntry is one line of leader-epoch-checkpoint.
type epochEntry struct {
	Epoch       int32
	StartOffset int64
}

func readEpochCheckpoint(path string) ([]epochEntry, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines, err := checkpointLines(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]epochEntry, 0, len(lines))
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s: malformed line %q", path, l)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: malformed line %q", path, l)
		}
		out = append(out, epochEntry{int32(e), o})
	}
	return out, nil
}

func writeEpochCheckpoint(path string, entries []epochEntry) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return writeFileAtomic(path, b.Bytes())
}

// Topic ids print as Kafka's Uuid.toString: URL-safe base64 without padding.
func encodeTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func decodeTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("bad topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// writePartitionMetadata writes PartitionMetadataFile's format.
func writePartitionMetadata(dir string, id [16]byte) error {
	return writeFileAtomic(filepath.Join(dir, partitionMetaFile),
		[]byte("version: 0\ntopic_id: "+encodeTopicID(id)+"\n"))
}

func readPartitionMetadata(dir string) ([16]byte, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, partitionMetaFile))
	if os.IsNotExist(err) {
		return [16]byte{}, false, nil
	}
	if err != nil {
		return [16]byte{}, false, err
	}
	var version, topicID string
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "version":
			version = strings.TrimSpace(v)
		case "topic_id":
			topicID = strings.TrimSpace(v)
		}
	}
	if version != "0" {
		return [16]byte{}, false, fmt.Errorf("%s: unsupported version %q", partitionMetaFile, version)
	}
	id, err := decodeTopicID(topicID)
	if err != nil {
		return [16]byte{}, false, fmt.Errorf("%s: %w", partitionMetaFile, err)
	}
	return id, true, nil
}

// writeMetaProperties writes a KRaft meta.properties (MetaProperties v1).
func writeMetaProperties(dir, clusterID string, nodeID int32, dirID [16]byte) error {
	var b bytes.Buffer
	b.WriteString("#\n#Written by Cascade\n")
	fmt.Fprintf(&b, "cluster.id=%s\ndirectory.id=%s\nnode.id=%d\nversion=1\n", clusterID, encodeTopicID(dirID), nodeID)
	return writeFileAtomic(filepath.Join(dir, metaPropertiesFile), b.Bytes())
}

// readMetaProperties parses a Java properties file of simple key=value lines.
func readMetaProperties(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, metaPropertiesFile))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("%s: malformed line %q", metaPropertiesFile, l)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// cleanShutdown is the content Kafka 4's CleanShutdownFileHandler writes.
type cleanShutdown struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// readCleanShutdown returns the broker epoch of dir's clean-shutdown
// marker; ok is false when there is none. A marker without a readable
// epoch (an older Cascade's or an empty file) still marks a clean
// shutdown, of epoch -1.
func readCleanShutdown(dir string) (epoch int64, ok bool) {
	data, err := os.ReadFile(filepath.Join(dir, cleanShutdownFile))
	if err != nil {
		return -1, false
	}
	var c cleanShutdown
	if json.Unmarshal(data, &c) != nil {
		return -1, true
	}
	return c.BrokerEpoch, true
}

func writeCleanShutdown(dir string, brokerEpoch int64) error {
	data, err := json.Marshal(cleanShutdown{Version: 0, BrokerEpoch: brokerEpoch})
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, cleanShutdownFile), data)
}

// ReadMetaProperties returns the key/values of dir's meta.properties; the
// error satisfies os.IsNotExist when the file is absent.
func ReadMetaProperties(dir string) (map[string]string, error) { return readMetaProperties(dir) }
