// Package bench is the engine of cascade-bench, Cascade's load tool: it
// produces and consumes a fixed, verifiable workload against any Kafka
// bootstrap address, and compares Cascade with Apache Kafka and franz-go's
// kfake on the same machine in one run.
//
// It owns the workload (Workload: sizes, client settings, deterministic
// incompressible payloads that carry their own record id and checksum), the
// client drivers (franz-go, confluent-kafka-go, and the raw client of
// raw*.go, which replays prebuilt batches and checks fetched ones by header
// and CRC so that it costs the machine next to nothing), exact measurement
// (acknowledgement latency from the moment a send is offered, kept as an
// exact sorted sample; broker CPU and peak RSS from /proc), exact
// verification that every record was consumed once, the targets it can
// start itself (Cascade as a child process with a fresh data dir, Apache
// Kafka from the matrix's Maven jars, kfake in a helper process), the
// hardware limits measured beside them (sequential disk writes, loopback
// TCP), and the report (a table on screen and JSON).
//
// It imports nothing from broker/ (its tests use broker/brokertest and
// broker/record): every target is a black box over TCP, as
// Kafka's own kafka-producer-perf-test and kafka-consumer-perf-test treat a
// cluster.
//
//	w := bench.DefaultWorkload()
//	w.Records, w.PayloadBytes = 100000, 1024
//	rep, err := bench.Compare(ctx, []bench.Target{bench.External{Addr: "127.0.0.1:9092"}}, w,
//		bench.CompareOptions{Rounds: 1, Options: bench.Options{Progress: os.Stderr, ProgressEvery: time.Second, PlantLoss: -1}})
//	if err != nil { ... }
//	bench.WriteTable(os.Stdout, rep)
package bench
