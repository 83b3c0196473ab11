package proxy

// TableOf identifies the table serving now, so that tests can tell an in-place endpoint update
// (the same table) from a rebuild.
func TableOf(p *Proxy) any { return p.cur.Load() }
