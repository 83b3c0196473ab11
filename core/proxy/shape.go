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

// sum is the content hash of one part of a snapshot (a route, a cluster without its endpoints):
// what the builder compares to share the serving table's compiled parts (reuse.go).
type sum [sha256.Size]byte

// digest is what apply learns of a snapshot in one pass before building it: its shape, and the
// sums of its virtual hosts, routes and clusters in the order the builder visits them
// (listeners, their servers, virtual hosts and routes; clusters in snapshot order).
type digest struct {
	shape shape
	// servers are each server's virtual hosts in runs, in the order visited (runs the remembered
	// digest shares: never written). A build that meets the run its serving table was built from
	// shares that run's compiled virtual hosts whole (vhostreuse.go).
	servers  [][]*vrun
	clusters []clusterRef // never written: may be the remembered list
	// secrets is the sum of the snapshot's secrets: what a build compares to share every
	// cluster (vhostreuse.go).
	secrets sum
	// sameClusters: the snapshot's clusters are the very messages of the previous digest's, in
	// the same order (only with remembered sums: Options.SharedMessages), so neither their
	// heads nor their endpoints changed.
	sameClusters bool
	// gen numbers the digests of a partSums (0 without one): the runs it made have it.
	gen uint64
}

// vrun is a run of a server's virtual hosts: cut where a virtual host's sum begins with a byte
// below runCut (one in 64) or at the server's last, so where runs begin depends on the content
// of the virtual hosts before them only, as the snapshot version's runs (core/ir/v1/version.go).
// A one-route change makes one new run (two when it moves a cut); the remembered digest shares
// the others, found by comparing their virtual hosts' pointers (vrunFinder), and the shape hashes
// one chunk per run, not one per virtual host.
type vrun struct {
	vhs  []*irv1.VirtualHost
	sums []vhostSums
	sum  sum // of the virtual hosts' sums, as chunks
	// open: its last virtual host does not end a run (the server's list ended there), so it is
	// the same run only at the end of a list.
	open bool
	// made is the digest that made it (digest.gen): no table was built from a run of the
	// digest being built.
	made uint64
}

// vhostSums are a virtual host's sums: its routes', and its own (hostname and route sums).
type vhostSums struct {
	routes []sum
	all    sum
}

// runCut: a virtual host whose sum's first byte is below it ends its run.
const runCut = 4

// shapeOf hashes every part of snap that the table is compiled from, except endpoints.
func shapeOf(snap *irv1.Snapshot) shape { return digestOf(snap).shape }

// digestOf encodes each route and each cluster head deterministically into one reused buffer and
// hashes it into its sum; the shape hashes the listener and server heads (each without its
// children), each virtual host's sum (its hostname and its routes' sums) in tree order, the sum
// of the cluster sums, and the secrets, Gateways and ACME challenges, each chunk tagged with its
// kind and length so that no part can pass for another.
func digestOf(snap *irv1.Snapshot) *digest { return (*partSums)(nil).digest(snap) }

// partSums remembers the runs of virtual hosts and the cluster heads' sums of the previous
// digest, for a proxy whose snapshots share the messages that did not change with the previous
// one and never change a message once applied (Options.SharedMessages: the in-process
// publisher's, whose translator shares unchanged virtual hosts, and the agent's, whose delta
// rebuilds do). A one-route change then encodes and hashes that route, its virtual host and its
// run, not all 5,000 routes: what is left per run is a comparison of its pointers (memory
// compared, not a loop) and one chunk of the shape. A nil *partSums remembers nothing.
//
// Clusters are kept as a list, and a cluster is looked for at the same place in it (or a
// little after: clusters removed in front of it shift it); a list is indexed only for a digest
// in which many clusters were not where expected (reordered, or many removed).
type partSums struct {
	prev, cur               [][]*vrun // per server, in the order visited
	prevClusters, clustersN []clusterRef
	// prevSum and curSum are the sums of prevClusters' and clustersN's sums; keptClusters that
	// this digest's clusters are prevClusters (the same messages), which finish then keeps.
	prevSum, curSum sum
	keptClusters    bool
	fresh           int // virtual hosts and clusters this digest hashed (tests)
	runs            int // runs this digest hashed (tests)
	digests         uint64
}

type clusterRef struct {
	c   *irv1.Cluster
	sum sum
}

// lookAhead is how far past the expected position aligned looks (parts removed in front of a
// part shift it by that many), and how many misses it takes (new or changed parts) before it
// indexes the previous list.
const lookAhead = 32

// aligned finds clusters of the previous digest in their list: at or a little after where the
// previous one was found, else further on, or, once lookAhead were not found there, by an index
// of the list (reordered clusters).
type aligned[M any, R any] struct {
	prev   []R
	key    func(R) *M
	next   int
	misses int
	index  map[*M]int
}

func (a *aligned[M, R]) find(m *M) (R, bool) {
	var none R
	if a == nil {
		return none, false
	}
	for j := a.next; j < min(len(a.prev), a.next+lookAhead); j++ {
		if a.key(a.prev[j]) == m {
			a.next = j + 1
			return a.prev[j], true
		}
	}
	if a.index == nil && a.misses < lookAhead {
		// Further on (parts removed in front of it): a scan of pointers, for the first few
		// misses, which are mostly new parts that a scan does not find.
		a.misses++
		for j := a.next + lookAhead; j < len(a.prev); j++ {
			if a.key(a.prev[j]) == m {
				a.next = j + 1
				return a.prev[j], true
			}
		}
		return none, false
	}
	if a.index == nil {
		a.index = make(map[*M]int, len(a.prev))
		for j, r := range a.prev {
			a.index[a.key(r)] = j
		}
	}
	if j, ok := a.index[m]; ok {
		a.next = j + 1
		return a.prev[j], true
	}
	return none, false
}

func clusterOf(r clusterRef) *irv1.Cluster { return r.c }

func (m *partSums) digest(snap *irv1.Snapshot) *digest {
	d := &digest{}
	h := &chunker{h: sha256.New()}
	opts := proto.MarshalOptions{Deterministic: true}
	bp, rp := shapeBufs.Get().(*[]byte), shapeBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	h.batch = (*rp)[:0]
	defer func() {
		*bp, *rp = buf[:0], h.batch[:0]
		shapeBufs.Put(bp)
		shapeBufs.Put(rp)
	}()
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
	// vhostSum returns vh's route sums and its own sum.
	vhostSum := func(vh *irv1.VirtualHost) vhostSums {
		// A virtual host is its hostname and its routes (TestVirtualHostHeadCoversFields).
		vhc.h.Reset()
		vhc.writeString(6, vh.GetHostname())
		routes := make([]sum, len(vh.GetRoutes()))
		for i, r := range vh.GetRoutes() {
			routes[i] = sumOf(r)
			vhc.writeSum(7, &routes[i])
		}
		return vhostSums{routes: routes, all: vhc.sum()}
	}
	rc := &chunker{h: sha256.New()}
	d.gen = m.start()
	for _, l := range snap.GetListeners() {
		add(1, irv1.ListenerHead(l))
		for _, s := range l.GetServers() {
			add(5, irv1.ServerHead(s))
			found := m.server()
			vhs := s.GetVirtualHosts()
			runs := make([]*vrun, 0, found.prevRuns()+1)
			recs := h.batch[:0] // the runs' chunks, hashed in one write per server
			var fresh *vrun
			for i := 0; i < len(vhs); {
				if fresh == nil {
					if r := found.runAt(vhs, i); r != nil {
						runs = append(runs, r)
						recs = appendChunk(recs, 6, r.sum[:])
						i += len(r.vhs)
						continue
					}
					fresh = &vrun{made: d.gen}
					rc.batch = rc.batch[:0]
				}
				vh := vhs[i]
				vs, ok := found.element(vh)
				if !ok {
					vs = vhostSum(vh)
					m.countFresh()
				}
				fresh.vhs, fresh.sums = append(fresh.vhs, vh), append(fresh.sums, vs)
				rc.batch = appendChunk(rc.batch, 6, vs.all[:])
				i++
				if cut := vs.all[0] < runCut; cut || i == len(vhs) {
					rc.h.Reset()
					rc.h.Write(rc.batch)
					fresh.sum, fresh.open = rc.sum(), !cut
					runs = append(runs, fresh)
					recs = appendChunk(recs, 6, fresh.sum[:])
					fresh = nil
					m.countRun()
				}
			}
			h.h.Write(recs)
			h.batch = recs[:0]
			m.keepServer(runs)
			d.servers = append(d.servers, runs)
		}
	}
	d.clusters, d.sameClusters = m.sameClusters(snap.GetClusters())
	var clustersSum sum
	if d.sameClusters {
		clustersSum = m.prevSum
	} else {
		head := &irv1.Cluster{} // reused: one allocation, not one per cluster
		clusters := m.clusterList()
		d.clusters = make([]clusterRef, 0, len(snap.GetClusters()))
		ch := &chunker{h: sha256.New()}
		recs := h.batch[:0] // the cluster sums' chunks, hashed in one write
		for _, c := range snap.GetClusters() {
			r, ok := clusters.find(c)
			if !ok {
				setClusterHead(head, c)
				r = clusterRef{c: c, sum: sumOf(head)}
				m.countFresh()
			}
			m.keepCluster(r)
			d.clusters = append(d.clusters, r)
			recs = appendChunk(recs, 2, r.sum[:])
		}
		ch.h.Write(recs)
		h.batch = recs[:0]
		clustersSum = ch.sum()
		m.keepClustersSum(clustersSum)
	}
	h.writeSum(2, &clustersSum)
	secrets := &chunker{h: sha256.New()}
	for _, s := range snap.GetSecrets() {
		flag, b := encode(s)
		h.write(3|flag, b)
		secrets.write(3|flag, b)
	}
	d.secrets = secrets.sum()
	for _, g := range snap.GetGateways() {
		add(4, g)
	}
	for _, c := range snap.GetAcmeChallenges() {
		add(8, c)
	}
	m.finish()
	d.shape = shape(h.sum())
	return d
}

// start begins a digest and returns its number.
func (m *partSums) start() uint64 {
	if m == nil {
		return 0
	}
	m.digests++
	m.fresh, m.runs = 0, 0
	clear(m.cur) // no older runs kept alive by the array
	m.cur, m.clustersN = m.cur[:0], m.clustersN[:0]
	return m.digests
}

// finish makes this digest's lists the previous ones.
func (m *partSums) finish() {
	if m == nil {
		return
	}
	m.prev, m.cur = m.cur, m.prev
	if !m.keptClusters {
		m.prevClusters, m.clustersN = m.clustersN, m.prevClusters
		m.prevSum, m.curSum = m.curSum, m.prevSum
	}
}

// sameClusters returns the previous digest's clusters and true when cs are the same messages
// in the same order: their sums, and the sum of them, are the previous ones.
func (m *partSums) sameClusters(cs []*irv1.Cluster) ([]clusterRef, bool) {
	if m == nil {
		return nil, false
	}
	m.keptClusters = len(m.prevClusters) == len(cs) && len(cs) > 0
	for i := 0; m.keptClusters && i < len(cs); i++ {
		m.keptClusters = m.prevClusters[i].c == cs[i]
	}
	if !m.keptClusters {
		return nil, false
	}
	return m.prevClusters, true
}

// keepClustersSum remembers the sum of this digest's cluster sums.
func (m *partSums) keepClustersSum(s sum) {
	if m != nil {
		m.curSum = s
	}
}

// rollback makes the previous digest's lists the previous ones again: the snapshot just
// digested was not applied (its build failed), so the next one is compared with what serves.
//
// finish only swaps lists, so doing it again (keptClusters unchanged since) undoes it.
func (m *partSums) rollback() { m.finish() }

// server returns a finder over the runs of the server visited at the same place in the previous
// digest (nil without remembered sums).
func (m *partSums) server() *vrunFinder {
	if m == nil {
		return nil
	}
	f := &vrunFinder{}
	if k := len(m.cur); k < len(m.prev) {
		f.prev = m.prev[k]
	}
	return f
}

// keepServer remembers the runs of the server just digested.
func (m *partSums) keepServer(runs []*vrun) {
	if m != nil {
		m.cur = append(m.cur, runs)
	}
}

func (m *partSums) countRun() {
	if m != nil {
		m.runs++
	}
}

func (m *partSums) countFresh() {
	if m != nil {
		m.fresh++
	}
}

func (m *partSums) clusterList() *aligned[irv1.Cluster, clusterRef] {
	if m == nil {
		return nil
	}
	return &aligned[irv1.Cluster, clusterRef]{key: clusterOf, prev: m.prevClusters}
}

func (m *partSums) keepCluster(r clusterRef) {
	if m != nil {
		m.clustersN = append(m.clustersN, r)
	}
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
	// batch is chunks written at once: thousands of small writes cost the hash more than
	// their bytes.
	batch []byte
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

// appendChunk appends what write would hand the hash for (tag, b).
func appendChunk(buf []byte, tag byte, b []byte) []byte {
	buf = append(buf, tag)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(b)))
	return append(buf, b...)
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
