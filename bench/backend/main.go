// Command backend is the benchmark's upstream: a small HTTP/1.1 keep-alive server that answers every
// GET with a fixed body, chosen by the path ("/16k" → 16 KiB, "/1k" → 1 KiB, anything else → the 12
// bytes "hello world\n"). It does the least work a correct keep-alive server can (one read, one
// write per request, precomputed responses) so that the proxy in front of it is what the benchmark
// measures. With -h2c it also serves cleartext HTTP/2 with prior knowledge through net/http, for the
// HTTP/2-upstream cases.
//
// It is a benchmark fixture, not a general server: it reads a request header of at most 8 KiB,
// skips a Content-Length body, rejects chunked request bodies, and closes on anything it does not
// understand.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18080", "comma-separated HTTP/1.1 listen addresses")
	h2c := flag.String("h2c", "", "comma-separated cleartext HTTP/2 (prior knowledge) + HTTP/1.1 listen addresses (net/http)")
	flag.Parse()
	for _, addr := range split(*listen) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			log.Fatal(err)
		}
		go serveRaw(ln, responses(portOf(addr)))
	}
	for _, addr := range split(*h2c) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			log.Fatal(err)
		}
		go serveH2C(ln, responses(portOf(addr)))
	}
	fmt.Fprintln(os.Stderr, "backend ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// responses precomputes the full HTTP/1.1 responses (header + body) and the bodies for h2c.
type responseSet struct {
	raw    [3][]byte
	bodies [3][]byte
	port   string
}

func responses(port string) *responseSet {
	rs := &responseSet{port: port}
	rs.bodies = [3][]byte{[]byte("hello world\n"), bytes.Repeat([]byte("a"), 1<<10), bytes.Repeat([]byte("b"), 16<<10)}
	for i, b := range rs.bodies {
		h := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Backend-Port: " + port +
			"\r\nContent-Length: " + strconv.Itoa(len(b)) + "\r\n\r\n"
		rs.raw[i] = append([]byte(h), b...)
	}
	return rs
}

func pick(path []byte) int {
	switch {
	case bytes.Contains(path, []byte("16k")):
		return 2
	case bytes.Contains(path, []byte("1k")):
		return 1
	}
	return 0
}

func serveRaw(ln net.Listener, rs *responseSet) {
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go handleRaw(c, rs)
	}
}

var errBad = errors.New("bad request")

func handleRaw(c net.Conn, rs *responseSet) {
	defer func() { _ = c.Close() }()
	br := bufio.NewReaderSize(c, 8<<10)
	for {
		which, bodyLen, closeAfter, err := readRequest(br)
		if err != nil {
			return
		}
		if bodyLen > 0 {
			if _, err := br.Discard(bodyLen); err != nil {
				return
			}
		}
		if _, err := c.Write(rs.raw[which]); err != nil || closeAfter {
			return
		}
	}
}

// readRequest reads one request header and returns which body to send, the request body length
// and whether the client asked to close.
func readRequest(br *bufio.Reader) (which, bodyLen int, closeAfter bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, err
	}
	f := bytes.Fields(line)
	if len(f) != 3 {
		return 0, 0, false, errBad
	}
	which = pick(f[1])
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, err
		}
		if len(line) <= 2 {
			return which, bodyLen, closeAfter, nil
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, 0, false, errBad
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("content-length")):
			if bodyLen, err = strconv.Atoi(string(v)); err != nil || bodyLen < 0 {
				return 0, 0, false, errBad
			}
		case bytes.EqualFold(k, []byte("transfer-encoding")):
			return 0, 0, false, errBad
		case bytes.EqualFold(k, []byte("connection")):
			closeAfter = bytes.EqualFold(v, []byte("close"))
		}
	}
}

func serveH2C(ln net.Listener, rs *responseSet) {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b := rs.bodies[pick([]byte(r.URL.Path))]
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Backend-Port", rs.port)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	})}
	log.Fatal(srv.Serve(ln))
}
