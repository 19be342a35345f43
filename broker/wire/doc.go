// Package wire owns Cascade's side of the Kafka wire protocol below the
// message bodies: length-prefixed frames, the request header (v0-v2) and
// response header (v0-v1) codecs, the per-connection server loop, and the
// memory bounds every request is read under.
//
// Message bodies are decoded and encoded by franz-go's kmsg; this package
// only bounds and frames them. Each connection runs three goroutines: a
// reader, which reads frames and keeps watching the socket; an executor,
// which parses each request's header and hands it to the Dispatcher, one
// request at a time in arrival order; and a writer, which writes responses
// strictly in request order. A client may pipeline requests: while one is
// served the reader queues at most one more (heldRequests), holds one more
// read, and then only probes the socket for a close (one byte into its
// small buffer), reading nothing further. Because the reader keeps watching
// while a request is served, a close or reset of the socket cancels the
// connection's context at once: a parked long poll (Fetch) is woken and
// dropped, and its budget freed, as Kafka's purgatory drops the delayed
// requests of a closed connection. A slow client only ever blocks its own
// connection.
//
// A panic in the dispatcher, the header or size scan, or a response's
// encoding is contained to its connection, as net/http contains a
// handler's: it is logged with the request's api key, version and stack,
// counted (Observer.PanicRecovered) and the connection is closed.
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
//  3. The body, read in steps: a buffer of readStep (64 KiB) bytes, then
//     each step four times larger up to the frame's size, each reserved
//     from the broker-wide Budget (queued.max.request.bytes) on the
//     request's Lease before it is allocated. So a connection holds budget
//     for the bytes it has delivered (at most four times them, at least
//     one step),
//     never for what its length prefix announces: a sender that stalls or
//     trickles one byte at a time mid-frame, or an honest producer on a
//     slow link, holds one step and makes no other connection wait. When
//     a step does not fit, one lease at a time may exceed the limit (the
//     overcommitted lease, like Kafka's non-strict SimpleMemoryPool, so
//     that no request is refused for its size and half-read frames can
//     never deadlock the budget); other readers wait, in arrival order,
//     without reading (Kafka mutes the channel).
//  4. Once the whole frame is in, the reader takes the decode
//     reservation (the executor never waits for the budget, so a request
//     held behind an earlier one of its connection has all it needs and
//     the budget cannot deadlock on it): Reservation(key, version, n) (frame size ×
//     DecodeAmplification + ReservationSlack; for the decodeCapped APIs at
//     most decodeCap, twice socket.request.max.bytes + ReservationSlack).
//     For Produce, Metadata and the decodeCapped APIs a scan of the body
//     (sizeEstimate) first computes what decoding will really allocate
//     (records, group metadata and assignments alias the frame) and that
//     is reserved instead, so large legitimate requests hold about their
//     own size, not their worst case. A decodeCapped request whose
//     reservation was clipped and whose scan exceeds decodeCap, or cannot
//     be completed, closes the connection before it is decoded.
//     Well-formed requests decode to about their frame, a copy of their
//     strings and their structs, so string-heavy ones up to
//     socket.request.max.bytes are answered, as in Kafka; what is refused
//     is a frame made mostly of near-empty elements (crafted, or an
//     OffsetCommit of empty metadata above about a third of
//     socket.request.max.bytes).
//  5. When the dispatcher has decoded the body it calls Request.Decoded,
//     and the decode reservation goes back: all of it, or all but the
//     frame's bytes for a request that may alias its frame (byte fields,
//     or unknown tagged fields in flexible versions), as Kafka frees a
//     request's buffer once parsed unless its schema has BYTES fields.
//     So a long-poll Fetch parked for MaxWaitMs holds at most its frame.
//     A request that is done with its body but not yet answered (an
//     acks=all Produce waiting for its ISR) calls Request.Consumed and
//     holds nothing.
//     A Produce also keeps, from the start, the decoder memory that
//     validating its largest record set will hold (a zstd window, LZ4
//     blocks, a snappy block; record.SetDecodeMemory, read from the batch
//     headers under Server.RecordLimits), since the handler validates its
//     sets one after another while it is served: a few kilobytes declaring
//     a 64 MiB window weigh 64 MiB in the budget, not a few kilobytes.
//     What is left is released when the dispatcher returns.
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
// one lease (the overcommitted one), and one lease is at most about
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
// responses, while one that reads a large response slowly stays open. A
// connection whose request is being served (a long poll) is not idle.
// queued.max.request.bytes=-1 (Kafka's default) disables the budget;
// Cascade's default is 1 GiB.
//
// Accepting never stops while the server is open: a failing accept
// (EMFILE, ENFILE, ENOBUFS, ...) is counted (Observer.AcceptError), logged
// at most every 10 s and retried after 5 ms doubling to 1 s, as net/http's
// Server, so the listener serves again once descriptors free up. The
// ConnectionQuotas are Kafka's (ConnectionQuotas, Acceptor):
// max.connections stops accepting until a connection closes;
// max.connections.per.ip and max.connections.per.ip.overrides close a
// connection beyond its address's limit at once; above
// max.connection.creation.rate, measured as Kafka's Rate over eleven 1 s
// samples, the acceptor waits out a throttle time of at most 1 s before
// handing over the new connection.
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
