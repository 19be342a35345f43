// Package broker is the composition root of a Cascade broker: it opens the
// metadata store and the log dirs, keeps this node's partitions in step with
// the metadata image, serves the Kafka protocol on the client listener and,
// when configured, Prometheus metrics and pprof on the admin listener.
//
// Use:
//
//	cfg, err := config.Load("server.properties", overrides)
//	b, err := broker.Start(ctx, broker.Config{Broker: cfg})
//	fmt.Println(b.Addr())
//	defer b.Close()
package broker
