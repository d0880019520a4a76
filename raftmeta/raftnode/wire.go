package raftnode

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// The controller listener speaks a small protocol of its own between
// Gregor nodes. Every connection carries frames:
//
//	length  uint32 big endian, of the payload (at most the transport's
//	        MaxFrameBytes; a handshake at most maxHandshakeBytes)
//	payload
//
// The dialer's first frame is a hello and the acceptor answers with a
// welcome (or a refusal, after which it closes the connection):
//
//	hello    "GRGR", version (1), kind (1 raft, 2 rpc), from node ID
//	         (uvarint), expected node ID of the acceptor (uvarint, 0 when
//	         unknown), cluster ID (string)
//	welcome  "GRGR", status (0 ok, else a refusal), the acceptor's node ID
//	         (uvarint), its cluster ID (string), a message (string)
//
// On a raft connection each later frame in either direction is one
// raftpb.Message in its protobuf encoding. On an rpc connection the dialer
// sends requests and the acceptor answers them, possibly out of order:
//
//	request   correlation ID (uvarint), API (1 byte), timeout in ms
//	          (uvarint), body
//	response  correlation ID (uvarint), the leader the acceptor knows
//	          (uvarint, 0 if none), the call's error code (int16) and,
//	          unless it is 0, its message (nullable string), body
//
// The error and the body are the handler's answer (RPCHandler,
// AppendCallError); what a body holds is the caller's business (package
// controller encodes its calls by their Go shape).
const (
	wireMagic         = "GRGR"
	wireVersion       = 1
	maxHandshakeBytes = 4 << 10

	connRaft byte = 1
	connRPC  byte = 2

	helloOK           byte = 0
	helloWrongCluster byte = 1
	helloWrongNode    byte = 2
	helloBadRequest   byte = 3
	helloNotReady     byte = 4
)

// errFrameTooLarge is returned for a frame over the limit; the connection
// is closed without reading it.
var errFrameTooLarge = errors.New("frame too large")

// readFrame reads one frame of at most max bytes.
func readFrame(r *bufio.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("read frame of %d bytes: %w", n, io.ErrUnexpectedEOF)
	}
	return b, nil
}

// writeFrame writes one frame; the caller flushes.
func writeFrame(w *bufio.Writer, payload []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

type hello struct {
	kind      byte
	from      uint64
	to        uint64
	clusterID string
}

type welcome struct {
	status    byte
	nodeID    uint64
	clusterID string
	message   string
}

func encodeHello(h hello) []byte {
	e := compact.Encoder{Buf: []byte(wireMagic)}
	e.Buf = append(e.Buf, wireVersion, h.kind)
	e.Uvarint(h.from)
	e.Uvarint(h.to)
	e.Str(h.clusterID)
	return e.Buf
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) < len(wireMagic)+2 || string(b[:len(wireMagic)]) != wireMagic {
		return h, errors.New("decode hello: not a Gregor controller connection")
	}
	if v := b[len(wireMagic)]; v != wireVersion {
		return h, fmt.Errorf("decode hello: unsupported version %d", v)
	}
	h.kind = b[len(wireMagic)+1]
	d := compact.Decoder{Buf: b[len(wireMagic)+2:]}
	h.from = d.Uvarint()
	h.to = d.Uvarint()
	h.clusterID = d.Str()
	if d.Err == nil && len(d.Buf) != 0 {
		d.Fail("%d trailing bytes", len(d.Buf))
	}
	if d.Err != nil {
		return h, fmt.Errorf("decode hello: %w", d.Err)
	}
	if h.kind != connRaft && h.kind != connRPC {
		return h, fmt.Errorf("decode hello: unknown connection kind %d", h.kind)
	}
	return h, nil
}

func encodeWelcome(w welcome) []byte {
	e := compact.Encoder{Buf: []byte(wireMagic)}
	e.Buf = append(e.Buf, w.status)
	e.Uvarint(w.nodeID)
	e.Str(w.clusterID)
	e.Str(w.message)
	return e.Buf
}

func decodeWelcome(b []byte) (welcome, error) {
	var w welcome
	if len(b) < len(wireMagic)+1 || string(b[:len(wireMagic)]) != wireMagic {
		return w, errors.New("decode welcome: not a Gregor controller listener")
	}
	w.status = b[len(wireMagic)]
	d := compact.Decoder{Buf: b[len(wireMagic)+1:]}
	w.nodeID = d.Uvarint()
	w.clusterID = d.Str()
	w.message = d.Str()
	if d.Err == nil && len(d.Buf) != 0 {
		d.Fail("%d trailing bytes", len(d.Buf))
	}
	if d.Err != nil {
		return w, fmt.Errorf("decode welcome: %w", d.Err)
	}
	return w, nil
}
