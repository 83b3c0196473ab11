package proxy

// TableOf identifies the table serving now, so that tests can tell an in-place endpoint update
// (the same table) from a rebuild.
func TableOf(p *Proxy) any { return p.cur.Load() }

// StdlibPathOnly makes the current table's HTTP/1.1 clusters forward through the stdlib reverse
// proxy (their fast path finds no connection pool, as for a pick from a retired endpoint set),
// so that tests reach that path with any request.
func StdlibPathOnly(p *Proxy) {
	for _, cl := range p.cur.Load().clusters {
		s := *cl.set.Load()
		s.h1p0, s.h1 = nil, nil
		cl.set.Store(&s)
	}
}

// SetFullBuilds turns sharing with the serving table off (true) or on, so that tests and
// benchmarks can compare incremental builds with full ones.
func SetFullBuilds(p *Proxy, full bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fullBuilds = full
}
