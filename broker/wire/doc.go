// Package wire owns Cascade's side of the Kafka wire protocol below the
// message bodies: length-prefixed frames, the request header (v0-v2) and
// response header (v0-v1) codecs, the per-connection server loop, and the
// memory bounds every request is read under.
//
// Message bodies are decoded and encoded by franz-go's kmsg; this package
// only bounds and frames them. Each connection runs one reader goroutine,
// which reads a frame, parses its header and hands it to the Dispatcher, and
// one writer goroutine, which writes responses strictly in request order. A
// client may pipeline requests; a slow client only ever blocks its own
// connection.
//
// # Bounded allocation
//
// Bad input gets a Kafka error code or a closed connection, never an
// allocation beyond the configured bounds. Reading one request goes:
//
//  1. The 4-byte length. Above socket.request.max.bytes (Server
//     MaxRequestBytes) the connection closes before anything else is read,
//     as Kafka's NetworkReceive.
//  2. The api key and version (4 bytes). An unknown key closes the
//     connection. A frame longer than the key's APIFrameCap closes it too:
//     most APIs are capped at socket.request.max.bytes /
//     DecodeAmplification, never below MinAPIFrameCap (1 MiB), so that
//     their worst-case decode stays within one maximum-size frame; their
//     legitimate requests are far smaller. Produce and Metadata, and the
//     APIs whose legitimate requests grow with a group or a partition count
//     (ListOffsets, OffsetCommit, TxnOffsetCommit, DescribeConfigs,
//     CreateTopics, JoinGroup, SyncGroup: decodeCapped in scan.go), may
//     use the whole of socket.request.max.bytes, as in Kafka.
//  3. A reservation of Reservation(key, version, n) bytes (frame size ×
//     DecodeAmplification + ReservationSlack; for the decodeCapped APIs at
//     most decodeCap, twice socket.request.max.bytes + ReservationSlack)
//     from the broker-wide Budget,
//     queued.max.request.bytes. Like Kafka's non-strict SimpleMemoryPool it
//     is granted while anything is left, so no request is refused for its
//     size; while the budget is spent the reader waits, in arrival order,
//     without reading (Kafka mutes the channel). Only then is the body
//     buffer allocated and read.
//  4. For Produce, Metadata and the decodeCapped APIs, a scan of the body
//     (sizeEstimate) computes what decoding will really allocate (records,
//     group metadata and assignments alias the frame), and the reservation
//     shrinks to it, so large legitimate requests hold about their own
//     size, not their worst case. A decodeCapped request whose reservation
//     was clipped and whose scan exceeds decodeCap, or cannot be completed,
//     closes the connection before it is decoded. Well-formed requests
//     decode to about their frame, a copy of their strings and their
//     structs, so string-heavy ones up to socket.request.max.bytes are
//     answered, as in Kafka; what is refused is a frame made mostly of
//     near-empty elements (crafted, or an OffsetCommit of empty metadata
//     above about a third of socket.request.max.bytes).
//  5. The reservation is released when the dispatcher returns.
//
// DecodeAmplification is a generated table (amplification_gen.go): the most
// bytes kmsg allocates per frame byte when decoding crafted worst-case
// frames of each key, measured by TestDecodeAmplification, which fails if
// any measurement exceeds its reservation and regenerates the table with
// -rewrite. kmsg already refuses array lengths that the bytes present cannot
// hold at the element's minimum size; what remains is up to about 18× for
// arrays of short strings in non-flexible versions and about 41× for
// flexible versions, whose unknown tagged fields kmsg keeps in a map.
//
// So the bytes reserved at once never exceed queued.max.request.bytes plus
// one reservation, and one reservation is at most about
// socket.request.max.bytes (or MinAPIFrameCap × amplification) for the
// capped APIs, twice that for the decodeCapped APIs, and the real decoded size of a well-formed
// Produce or Metadata request. TestScanRealisticRequests holds each scanner
// to kmsg's field layout at every version.
//
// # Connections
//
// Accepted connections get keep-alive and, when set,
// socket.send.buffer.bytes as SO_SNDBUF; Listen sets
// socket.receive.buffer.bytes as SO_RCVBUF on the listening socket, as
// Kafka's Acceptor does, so that the window scale agreed in the handshake
// can use it. A connection with no request byte read and no response byte
// reaching the socket for connections.max.idle.ms (Server IdleTimeout) is
// closed with ErrIdle, as Kafka's Selector expires idle channels. Only
// progress counts, not a pending write: responses are written under a
// write deadline of half IdleTimeout, from memory in chunks of 64 KiB and
// from files (Fetch's log regions) with sendfile(2) at explicit offsets
// through progressWriter's ReadFrom, which returns to renew the deadline
// as bytes move. Each write that moves bytes records the time, and one that
// moves nothing for IdleTimeout fails with ErrIdle. So a client that stops
// reading is closed within one to two IdleTimeouts and frees its queued
// responses, while one that reads a large response slowly stays open. queued.max.request.bytes=-1 (Kafka's default) disables
// the budget; Cascade's default is 1 GiB.
//
// # Request buffers
//
// Produce frames are read into buffers from power-of-two size-class pools
// (1 KiB to 4 MiB; larger frames are allocated exactly and never kept) and
// given back only once the response has been written, because kmsg decoding
// aliases byte fields such as Records to the frame. A Dispatcher must
// therefore not keep a reference into a request after its response is
// written. Frames of other APIs are allocated per request, since their
// decoded byte fields may be kept (group member metadata). A pooled buffer
// may be up to twice the frame it holds; the reservation counts the frame.
// In test binaries released buffers are overwritten, so a handler that keeps
// request bytes shows up as corrupt data in tests.
//
// Use:
//
//	srv := &wire.Server{Dispatcher: d, MaxRequestBytes: 100 << 20, Budget: wire.NewBudget(1 << 30)}
//	go srv.Serve(ln)
//	defer srv.Close()
package wire
