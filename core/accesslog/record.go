package accesslog

import (
	"net/netip"
	"time"
)

// Kind is what a line describes; it is the line's msg.
type Kind uint8

const (
	// KindRequest is an HTTP request (msg "request"), a mirrored copy too (Mirror set).
	KindRequest Kind = iota
	// KindConnection is a TCPRoute or TLSRoute connection, logged when it ends (msg "connection").
	KindConnection
	// KindSession is a UDPRoute client session, logged when it ends (msg "session").
	KindSession
)

var kindMessages = [...]string{KindRequest: "request", KindConnection: "connection", KindSession: "session"}

// Record is one line's fields, captured on the request's (or connection's) goroutine and encoded
// by the writer. It holds no pointer of its own making: its strings are those the request, the
// route and the table already hold (immutable, so the writer may read them after the request
// has ended and its connection moved on), and everything else is a value. Empty strings and zero
// values are left out of the line, as docs/observability.md lists.
type Record struct {
	// The fields are in the order that keeps an HTTP request's slot in the queue to five cache
	// lines (the ring's slots are aligned to them): what a request always sets first, what a line
	// rarely carries (TLSSNI, Query, Error) last, where only the lines that carry them touch it.
	Kind    Kind
	Aborted bool
	Mirror  bool
	// Status is the response status (requests only; a mirror that got no answer has 0: left out).
	Status int
	// Time is when the request was dispatched (the connection accepted, the session opened).
	Time      time.Time
	Listener  string
	Gateway   string
	Route     string
	Rule      string // the route rule's name
	Backend   string // the cluster
	Upstream  string // the endpoint, "address:port"
	Method    string
	Host      string
	Path      string
	Protocol  string
	RequestID string
	// BytesIn and BytesOut: a request's declared body length and its response body bytes; a
	// connection's or session's bytes from and to the client.
	BytesIn, BytesOut int64
	Duration          time.Duration
	// UpstreamDuration is written when Upstream is set (requests only).
	UpstreamDuration time.Duration
	// ClientIP is the client as resolved (PROXY protocol, trusted X-Forwarded-For, a client_ip
	// filter); PeerIP the socket's peer, which differs from it behind a proxy or load balancer.
	ClientIP netip.Addr
	PeerIP   netip.Addr
	TLSSNI   string
	Query    string // written only by a Logger with Options.Query
	// Error says why a mirrored copy got no answer.
	Error string
}
