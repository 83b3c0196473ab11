package main

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"time"
)

// udpTimeout is how long a datagram may wait for its echo before it counts as lost.
const udpTimeout = 200 * time.Millisecond

func udpLoad(ctx context.Context, c *config, st *stats) { parallel(ctx, c, st, udpOne) }

// udpOne keeps c.window datagrams in flight on one socket (one client address, so one proxy
// session) until the phase ends. Each carries a sequence number; an echo of a datagram sent
// before the last timeout is late and ignored.
func udpOne(ctx context.Context, c *config, st *stats) {
	raddr, err := net.ResolveUDPAddr("udp", c.addr)
	if err != nil {
		st.fail(err)
		return
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		st.fail(err)
		return
	}
	defer func() { _ = conn.Close() }()
	out := make([]byte, max(c.size, 8))
	in := make([]byte, 64<<10)
	var next, valid uint64 // next sequence number; echoes below valid are late
	var inFlight int64     // datagrams sent since the last timeout and not answered yet
	var sentAt time.Time
	send := func() bool {
		binary.BigEndian.PutUint64(out, next)
		next++
		inFlight++
		sentAt = time.Now()
		if _, err := conn.Write(out); err != nil {
			st.fail(err)
			return false
		}
		return true
	}
	burst := func() bool {
		for range c.window {
			if !send() {
				return false
			}
		}
		return true
	}
	if !burst() {
		return
	}
	lat := make([]time.Duration, 0, 1<<16)
	for ctx.Err() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(udpTimeout))
		n, err := conn.Read(in)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			st.lost.Add(inFlight)
			valid, inFlight = next, 0
			if !burst() {
				return
			}
			continue
		case err != nil:
			st.fail(err) // e.g. ECONNREFUSED from an ICMP unreachable
			time.Sleep(time.Millisecond)
			valid, inFlight = next, 0
			if !burst() {
				return
			}
			continue
		case n < 8 || binary.BigEndian.Uint64(in) < valid:
			continue
		}
		inFlight--
		if c.window == 1 {
			lat = append(lat, time.Since(sentAt))
		}
		st.ops.Add(1)
		st.bytes.Add(int64(n))
		if !send() {
			return
		}
	}
	st.addLatencies(lat)
}
