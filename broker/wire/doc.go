// Package wire owns Cascade's side of the Kafka wire protocol below the
// message bodies: length-prefixed frames, the request header (v0-v2) and
// response header (v0-v1) codecs, and the per-connection server loop.
//
// Message bodies are decoded and encoded by franz-go's kmsg; this package
// only bounds and frames them. Each connection runs one reader goroutine,
// which reads a frame, parses its header and hands it to the Dispatcher, and
// one writer goroutine, which writes responses strictly in request order. A
// client may pipeline requests; a slow client only ever blocks its own
// connection.
//
// Use:
//
//	srv := &wire.Server{Dispatcher: d, MaxRequestBytes: 100 << 20}
//	go srv.Serve(ln)
//	defer srv.Close()
package wire
