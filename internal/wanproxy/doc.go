// Package wanproxy owns the emulated wide-area network between regions: a
// small userspace TCP proxy whose links add latency, limit bandwidth and
// inject faults (loss, partitions, black holes).
//
// It exists because the kernels of the machines Isobar is developed and
// tested on have no netem (sch_netem), so the usual "tc qdisc ... netem
// delay 40ms" cannot shape traffic between regions. Instead, tests and
// `isobar dev` make every cross-region TCP connection go through a [Link]:
// the link listens on a local address, dials the real target once per
// accepted connection and copies bytes both ways, shaping them on the way.
// It plays the role toxiproxy plays elsewhere, but it is our own, small and
// standard-library only, so it runs in-process and needs no daemon.
//
// A link has a direction: the client is whoever dialled the link's address,
// the target is the address the link forwards to. Each direction of each
// connection is a reader goroutine and a writer goroutine joined by a
// bounded queue (at most 4 MiB or 1024 chunks in flight); when the queue is
// full the reader stops reading, so TCP flow control pushes back on the
// sender exactly as a slow network would. The bytes of one direction of a
// connection are delivered in order, each chunk no earlier than its read
// time plus the latency (plus its loss delay), paced by the bandwidth. An
// end of stream (a peer's FIN) is forwarded, as a half-close, after the
// bytes queued before it; a peer's reset is forwarded as a reset.
//
// What each setting or fault means for a peer:
//
//   - Latency ([Link.SetLatency]): every chunk is delivered no earlier than
//     its read time plus the one-way delay, in each direction, so a request
//     and its reply take at least twice the latency. Changing it affects
//     bytes already queued.
//   - Bandwidth ([Link.SetBandwidth]): each direction of the link (all its
//     connections together) is paced to the given bytes per second; a peer
//     sees its writes block once the queue is full, like a thin pipe.
//   - Loss ([Link.SetLoss]): TCP never loses bytes, it retransmits them. So
//     a lost packet is emulated by what it costs a TCP stream: a chunk,
//     with the given probability, is held back for a retransmission timeout
//     of max(200 ms, 3 × latency), and every later chunk of that direction
//     waits behind it (head-of-line blocking). Peers see stalls, never gaps.
//   - Cut ([Link.Cut]): a partition both sides notice. Every open
//     connection is reset on both ends (RST: reads fail with "connection
//     reset by peer", or EOF once the reset has been consumed), and every
//     new connection is accepted and closed at once: the dial succeeds and
//     the first read sees EOF. A target that cannot be dialled looks the
//     same to the client.
//   - Black hole ([Link.Blackhole]): packets silently vanish. Open
//     connections stay open but no byte (nor FIN, nor reset) moves in
//     either direction; new connections complete the TCP handshake with the
//     proxy but are not dialled upstream and receive nothing. Nothing is
//     closed, so peers only notice through their own timeouts (heartbeats,
//     read deadlines, keepalives). A sender's writes keep succeeding until
//     the socket buffers and the link's queue (4 MiB) are full, then block,
//     as they would while TCP retransmits into the void.
//   - Up ([Link.Up]): back to normal. After a black hole, connections that
//     lived through it are kept and resume: bytes held during the black
//     hole are delivered in order and held new connections are then dialled
//     upstream, as TCP retransmission would achieve after a short outage
//     (Linux gives up on a connection only after about 15 minutes of
//     unacknowledged retransmits). To model an outage long enough for TCP
//     to give up, call [Link.Cut] before [Link.Up].
package wanproxy
