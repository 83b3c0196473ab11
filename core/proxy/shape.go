package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"

	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// shape is the content hash of a snapshot without its version and its clusters' endpoints. Two
// snapshots of the same shape compile to the same table but for the clusters' endpoint sets,
// which fastApply replaces in place.
type shape [sha256.Size]byte

// shapeOf hashes every part of snap that the table is compiled from, except endpoints. Each
// message is marshalled deterministically into one reused buffer and hashed with its length, so
// no part can pass for another.
func shapeOf(snap *irv1.Snapshot) shape {
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	bp := shapeBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() { *bp = buf[:0]; shapeBufs.Put(bp) }()
	add := func(tag byte, m proto.Message) {
		var err error
		buf, err = opts.MarshalAppend(buf[:0], m)
		if err != nil {
			buf = append(buf[:0], err.Error()...) // not reached for a valid message; never equal to a valid one's
			tag |= 0x80
		}
		writeChunk(h, tag, buf)
	}
	for _, l := range snap.GetListeners() {
		add(1, l)
	}
	for _, c := range snap.GetClusters() {
		add(2, clusterHead(c))
	}
	for _, s := range snap.GetSecrets() {
		add(3, s)
	}
	for _, g := range snap.GetGateways() {
		add(4, g)
	}
	for _, c := range snap.GetAcmeChallenges() {
		add(5, c)
	}
	var s shape
	h.Sum(s[:0])
	return s
}

// shapeBufs are the marshalling buffers of shapeOf: a listener of 10,000 routes encodes to ≈0.7 MB,
// which snapshots applied in a row reuse and an idle proxy lets go at its next collections.
var shapeBufs = sync.Pool{New: func() any { return new([]byte) }}

// clusterHead is c without its endpoints. TestClusterHeadCoversFields fails when Cluster gains a
// field this does not copy.
func clusterHead(c *irv1.Cluster) *irv1.Cluster {
	return &irv1.Cluster{Name: c.GetName(), Protocol: c.GetProtocol(), Balancer: c.GetBalancer(),
		ConnectTimeoutMs: c.GetConnectTimeoutMs(), IdleTimeoutMs: c.GetIdleTimeoutMs(),
		CircuitBreaker: c.GetCircuitBreaker(), SessionPersistence: c.GetSessionPersistence(), Tls: c.GetTls()}
}

func writeChunk(h hash.Hash, tag byte, b []byte) {
	var n [9]byte
	n[0] = tag
	binary.LittleEndian.PutUint64(n[1:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
