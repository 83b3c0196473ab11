package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// chunk is what one write of an upload sends.
var chunk = make([]byte, 256<<10)

func upload(ctx context.Context, c *config, st *stats) { parallel(ctx, c, st, uploadOne) }

func download(ctx context.Context, c *config, st *stats) { parallel(ctx, c, st, downloadOne) }

func connrate(ctx context.Context, c *config, st *stats) { parallel(ctx, c, st, connrateOne) }

// hardDeadline bounds every socket operation of a phase: the measured part ends at ctx's deadline,
// and whatever is still blocked 10 s later has failed.
func hardDeadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d.Add(10 * time.Second)
}

// uploadOne writes until the phase ends, half-closes, and checks the backend's byte count.
func uploadOne(ctx context.Context, c *config, st *stats) {
	conn, err := dial(ctx, c)
	if err != nil {
		st.fail(err)
		return
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(hardDeadline(ctx))
	if _, err := conn.Write([]byte{'u'}); err != nil {
		st.fail(err)
		return
	}
	var sent int64
	for ctx.Err() == nil {
		n, err := conn.Write(chunk)
		sent += int64(n)
		if err != nil {
			st.fail(err)
			return
		}
	}
	if err := closeWrite(conn); err != nil {
		st.fail(err)
		return
	}
	var count [8]byte
	if _, err := io.ReadFull(conn, count[:]); err != nil {
		st.fail(fmt.Errorf("reading the byte count: %w", err))
		return
	}
	st.finished(time.Now())
	if got := int64(binary.BigEndian.Uint64(count[:])); got != sent {
		st.fail(fmt.Errorf("backend received %d bytes of %d", got, sent))
		return
	}
	st.bytes.Add(sent)
}

func closeWrite(c net.Conn) error {
	switch c := c.(type) {
	case *net.TCPConn:
		return c.CloseWrite()
	case *tls.Conn:
		return c.CloseWrite() // close_notify: the backend's tls.Conn reads EOF
	}
	return errors.New("cannot half-close")
}

// downloadOne reads what the backend streams until the phase ends.
func downloadOne(ctx context.Context, c *config, st *stats) {
	conn, err := dial(ctx, c)
	if err != nil {
		st.fail(err)
		return
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte{'d'}); err != nil {
		st.fail(err)
		return
	}
	end, _ := ctx.Deadline()
	_ = conn.SetReadDeadline(end)
	buf := make([]byte, 256<<10)
	var got int64
	for {
		n, err := conn.Read(buf)
		got += int64(n)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			st.fail(err)
			break
		}
	}
	st.bytes.Add(got)
}

// connrateOne loops connect, send, read the echo, close until the phase ends.
func connrateOne(ctx context.Context, c *config, st *stats) {
	payload := bytes.Repeat([]byte{'x'}, max(c.size, 1))
	payload[0] = 'e'
	echo := make([]byte, len(payload))
	lat := make([]time.Duration, 0, 1<<16)
	for ctx.Err() == nil {
		t0 := time.Now()
		if err := oneConn(ctx, c, payload, echo); err != nil {
			st.fail(err)
			time.Sleep(time.Millisecond) // a proxy refusing connections must not make this spin
			continue
		}
		lat = append(lat, time.Since(t0))
		st.ops.Add(1)
		st.bytes.Add(int64(len(payload)))
	}
	st.addLatencies(lat)
}

func oneConn(ctx context.Context, c *config, payload, echo []byte) error {
	conn, err := dial(ctx, c)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(payload); err != nil {
		return err
	}
	if _, err := io.ReadFull(conn, echo); err != nil {
		return fmt.Errorf("reading the echo: %w", err)
	}
	if !bytes.Equal(echo, payload) {
		return errors.New("echo differs from what was sent")
	}
	return nil
}
