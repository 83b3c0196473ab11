package proxy

import (
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// open starts a stream on c: it takes the next stream ID and writes the request's HEADERS frame
// (fields by encode, which calls add for each) in one step under the write lock, as stream IDs
// must reach the peer in increasing order. endStream is set when the request has no body.
func (c *h2cConn) open(encode func(add func(name, value string)), endStream bool) (*h2cStream, error) {
	s := newH2CStream(c)
	var openErr error
	err := c.write(func() error {
		c.mu.Lock()
		if c.err != nil || c.goaway || c.nextID >= 1<<31-2 {
			openErr = errH2CGoAway
			c.mu.Unlock()
			return nil
		}
		s.id = c.nextID
		c.nextID += 2
		s.sendWindow = c.initWindow
		c.streams[s.id] = s
		c.mu.Unlock()
		c.hbuf.Reset()
		encode(func(name, value string) { _ = c.henc.WriteField(hpackField(name, value)) })
		if endStream {
			s.wclosed.Store(true)
		}
		return c.writeHeaderBlock(s.id, endStream)
	})
	if openErr != nil {
		return nil, openErr
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// writeHeaderBlock writes c.hbuf as HEADERS and, past the peer's frame size, CONTINUATION frames
// (c.wmu held).
func (c *h2cConn) writeHeaderBlock(id uint32, endStream bool) error {
	block := c.hbuf.Bytes()
	c.mu.Lock()
	max := int(c.maxFrame)
	c.mu.Unlock()
	first := block[:min(len(block), max)]
	block = block[len(first):]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndStream: endStream, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		frag := block[:min(len(block), max)]
		block = block[len(frag):]
		err = c.fr.WriteContinuation(id, len(block) == 0, frag)
	}
	return err
}

func hpackField(name, value string) hpack.HeaderField {
	return hpack.HeaderField{Name: name, Value: value}
}

// validH2Field reports whether a field may be sent as is: a lower-case token name and a value
// without CR, LF or NUL (anything else is dropped, never smuggled into another field).
func validH2Field(name, value string) bool {
	return httpguts.ValidHeaderFieldName(name) && httpguts.ValidHeaderFieldValue(value)
}

// lowerH2 is the HTTP/2 (lower-case) form of a canonical header name, without allocating for the
// common ones.
func lowerH2(k string) string {
	if v, ok := lowerNames[k]; ok {
		return v
	}
	return strings.ToLower(k)
}

// canonicalH2 is the canonical form of a received lower-case name, without allocating for the
// common ones.
func canonicalH2(k string) string {
	if v, ok := canonicalNames[k]; ok {
		return v
	}
	return http.CanonicalHeaderKey(k)
}

var lowerNames, canonicalNames = func() (map[string]string, map[string]string) {
	lower, canon := map[string]string{}, map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Date", "Etag", "Grpc-Accept-Encoding",
		"Grpc-Encoding", "Grpc-Message", "Grpc-Status", "Grpc-Status-Details-Bin", "Grpc-Timeout", "Last-Modified",
		"Location", "Origin", "Referer", "Server", "Set-Cookie", "Te", "Trailer", "User-Agent", "Vary",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id"} {
		lower[k] = strings.ToLower(k)
		canon[strings.ToLower(k)] = k
	}
	return lower, canon
}()

// trailerKeys maps a trailer name to its http.TrailerPrefix form, without allocating for gRPC's.
var trailerKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin"} {
		m[k] = http.TrailerPrefix + k
	}
	return m
}()

func trailerKey(k string) string {
	if v, ok := trailerKeys[k]; ok {
		return v
	}
	return http.TrailerPrefix + k
}

// h2cSkip are the request headers never forwarded as they are: connection-specific ones
// (forbidden in HTTP/2), Host (sent as :authority), and the forwarding headers the engine sets
// itself.
var h2cSkip = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Transfer-Encoding": true, "Upgrade": true, "Host": true, "Te": true, "Content-Length": true,
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true}

// h2cHopByHop are the response headers never copied to the client.
var h2cHopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}
