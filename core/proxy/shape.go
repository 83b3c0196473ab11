package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"maps"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// shape is the content hash of a snapshot without its version and its clusters' endpoints. Two
// snapshots of the same shape compile to the same table but for the clusters' endpoint sets,
// which fastApply replaces in place.
type shape [sha256.Size]byte

// sum is the content hash of one part of a snapshot (a route, a cluster without its endpoints):
// what the builder compares to share the serving table's compiled parts (reuse.go).
type sum [sha256.Size]byte

// digest is what apply learns of a snapshot in one pass before building it: its shape, and the
// sums of its routes and clusters in the order the builder visits them (listeners, their
// servers, virtual hosts and routes; clusters in snapshot order).
type digest struct {
	shape    shape
	routes   []sum
	clusters []sum
}

// shapeOf hashes every part of snap that the table is compiled from, except endpoints.
func shapeOf(snap *irv1.Snapshot) shape { return digestOf(snap).shape }

// digestOf encodes each route and each cluster head deterministically into one reused buffer and
// hashes it into its sum; the shape hashes the listener and server heads (each without its
// children), each virtual host's sum (its hostname and its routes' sums) and the cluster sums in
// tree order, each chunk tagged with its kind and length so that no part can pass for another.
func digestOf(snap *irv1.Snapshot) *digest { return (*partSums)(nil).digest(snap) }

// partSums remembers the sums of virtual hosts and cluster heads by message address, for a
// proxy whose snapshots share the messages that did not change with the previous one and never
// change a message once applied (Options.SharedMessages: the in-process publisher's, whose
// translator shares unchanged virtual hosts, and the agent's, whose delta rebuilds do). A
// one-route change then encodes and hashes that route and its virtual host, not all 5,000
// routes: what is left per virtual host is a map lookup, a copy of its sums and one 41-byte
// chunk of the shape. A nil *partSums remembers nothing.
type partSums struct {
	vhosts   map[*irv1.VirtualHost]*vhostSums
	clusters map[*irv1.Cluster]*clusterSum
	gen      uint64 // the digest being made
	used     int    // entries it used
	fresh    int    // virtual hosts and clusters it hashed (not remembered)
}

type vhostSums struct {
	routes []sum // in order
	all    sum   // the hostname and the route sums
	gen    uint64
}

type clusterSum struct {
	sum sum
	gen uint64
}

func (m *partSums) digest(snap *irv1.Snapshot) *digest {
	d := &digest{clusters: make([]sum, 0, len(snap.GetClusters()))}
	h := &chunker{h: sha256.New()}
	opts := proto.MarshalOptions{Deterministic: true}
	bp := shapeBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() { *bp = buf[:0]; shapeBufs.Put(bp) }()
	encode := func(msg proto.Message) (byte, []byte) {
		var err error
		buf, err = opts.MarshalAppend(buf[:0], msg)
		if err != nil {
			// Not reached for a valid message; never equal to a valid one's.
			return 0x80, append(buf[:0], err.Error()...)
		}
		return 0, buf
	}
	add := func(tag byte, msg proto.Message) {
		flag, b := encode(msg)
		h.write(tag|flag, b)
	}
	part := &chunker{h: sha256.New()}
	sumOf := func(msg proto.Message) sum {
		flag, b := encode(msg)
		part.h.Reset()
		part.write(flag, b)
		return part.sum()
	}
	vhc := &chunker{h: sha256.New()}
	// vhostSum appends vh's route sums to d.routes and returns its own sum.
	vhostSum := func(vh *irv1.VirtualHost) sum {
		// A virtual host is its hostname and its routes (TestVirtualHostHeadCoversFields).
		vhc.h.Reset()
		vhc.writeString(6, vh.GetHostname())
		for _, r := range vh.GetRoutes() {
			rs := sumOf(r)
			d.routes = append(d.routes, rs)
			vhc.writeSum(7, &rs)
		}
		return vhc.sum()
	}
	m.start()
	n := 0
	for _, l := range snap.GetListeners() {
		for _, s := range l.GetServers() {
			for _, vh := range s.GetVirtualHosts() {
				n += len(vh.GetRoutes())
			}
		}
	}
	d.routes = make([]sum, 0, n)
	for _, l := range snap.GetListeners() {
		add(1, irv1.ListenerHead(l))
		for _, s := range l.GetServers() {
			add(5, irv1.ServerHead(s))
			for _, vh := range s.GetVirtualHosts() {
				var vs sum
				if e := m.vhost(vh); e != nil {
					d.routes = append(d.routes, e.routes...)
					vs = e.all
				} else {
					from := len(d.routes)
					vs = vhostSum(vh)
					m.keepVhost(vh, d.routes[from:], vs)
				}
				h.writeSum(6, &vs)
			}
		}
	}
	head := &irv1.Cluster{} // reused: one allocation, not one per cluster
	for _, c := range snap.GetClusters() {
		cs, ok := m.cluster(c)
		if !ok {
			setClusterHead(head, c)
			cs = sumOf(head)
			m.keepCluster(c, cs)
		}
		d.clusters = append(d.clusters, cs)
		h.writeSum(2, &cs)
	}
	for _, s := range snap.GetSecrets() {
		add(3, s)
	}
	for _, g := range snap.GetGateways() {
		add(4, g)
	}
	for _, c := range snap.GetAcmeChallenges() {
		add(8, c)
	}
	m.sweep()
	d.shape = shape(h.sum())
	return d
}

// start begins a digest.
func (m *partSums) start() {
	if m == nil {
		return
	}
	if m.vhosts == nil {
		m.vhosts, m.clusters = map[*irv1.VirtualHost]*vhostSums{}, map[*irv1.Cluster]*clusterSum{}
	}
	m.gen++
	m.used, m.fresh = 0, 0
}

// vhost returns the remembered sums of vh, nil for none.
func (m *partSums) vhost(vh *irv1.VirtualHost) *vhostSums {
	if m == nil {
		return nil
	}
	e := m.vhosts[vh]
	if e != nil && e.gen != m.gen {
		e.gen = m.gen
		m.used++
	}
	return e
}

func (m *partSums) keepVhost(vh *irv1.VirtualHost, routes []sum, all sum) {
	if m == nil {
		return
	}
	m.vhosts[vh] = &vhostSums{routes: slices.Clone(routes), all: all, gen: m.gen}
	m.used++
	m.fresh++
}

// cluster returns the remembered head sum of c.
func (m *partSums) cluster(c *irv1.Cluster) (sum, bool) {
	if m == nil {
		return sum{}, false
	}
	e := m.clusters[c]
	if e == nil {
		return sum{}, false
	}
	if e.gen != m.gen {
		e.gen = m.gen
		m.used++
	}
	return e.sum, true
}

func (m *partSums) keepCluster(c *irv1.Cluster, s sum) {
	if m == nil {
		return
	}
	m.clusters[c] = &clusterSum{sum: s, gen: m.gen}
	m.used++
	m.fresh++
}

// sweep forgets the parts of older snapshots once they are most of what is remembered (they keep
// their messages alive).
func (m *partSums) sweep() {
	if m == nil || len(m.vhosts)+len(m.clusters) <= 2*m.used+1024 {
		return
	}
	maps.DeleteFunc(m.vhosts, func(_ *irv1.VirtualHost, e *vhostSums) bool { return e.gen != m.gen })
	maps.DeleteFunc(m.clusters, func(_ *irv1.Cluster, e *clusterSum) bool { return e.gen != m.gen })
}

// shapeBufs are the marshalling buffers of digestOf, reused by snapshots applied in a row; an
// idle proxy lets them go at its next collections.
var shapeBufs = sync.Pool{New: func() any { return new([]byte) }}

// setClusterHead makes h c without its endpoints. TestClusterHeadCoversFields fails when Cluster
// gains a field this does not copy.
func setClusterHead(h, c *irv1.Cluster) {
	h.Name, h.Protocol, h.Balancer = c.GetName(), c.GetProtocol(), c.GetBalancer()
	h.ConnectTimeoutMs, h.IdleTimeoutMs = c.GetConnectTimeoutMs(), c.GetIdleTimeoutMs()
	h.CircuitBreaker, h.SessionPersistence, h.Tls = c.GetCircuitBreaker(), c.GetSessionPersistence(), c.GetTls()
	h.Endpoints = nil
}

// chunker writes tagged, length-prefixed chunks into a hash. What it hands the hash goes
// through its own buffers, allocated once with it: a slice of a local array passed to the hash
// (an interface) would escape, one allocation per chunk.
type chunker struct {
	h   hash.Hash
	hdr [9]byte
	out sum
	str []byte
}

func (c *chunker) writeSum(tag byte, s *sum) {
	c.out = *s
	c.write(tag, c.out[:])
}

// sum is the hash of what was written.
func (c *chunker) sum() sum {
	c.h.Sum(c.out[:0])
	return c.out
}

func (c *chunker) write(tag byte, b []byte) {
	c.header(tag, len(b))
	c.h.Write(b)
}

func (c *chunker) writeString(tag byte, s string) {
	c.str = append(c.str[:0], s...)
	c.write(tag, c.str)
}

func (c *chunker) header(tag byte, n int) {
	c.hdr[0] = tag
	binary.LittleEndian.PutUint64(c.hdr[1:], uint64(n))
	c.h.Write(c.hdr[:])
}

func writeChunk(h hash.Hash, tag byte, b []byte) {
	var n [9]byte
	n[0] = tag
	binary.LittleEndian.PutUint64(n[1:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
