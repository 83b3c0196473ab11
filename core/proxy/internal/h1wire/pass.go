package h1wire

import (
	"bufio"
	"bytes"
)

// A response that no filter touches can be relayed from its parsed head as it came, without
// going through an http.Header map (one insert per field, then an iteration to write them):
// WriteFields, with Value for the few fields the relay and the writer look at.

// WriteFields writes the head's end-to-end fields as header lines, in the order they came, names
// canonical (ParseField made them so). ParseField admitted only token names and values without
// control characters, so they go out as they are: nothing in them can end the header early.
func (h *Head) WriteFields(bw *bufio.Writer) {
	for _, fl := range h.Fields {
		k := h.Raw[fl.K0:fl.K1]
		if h.hop(k) {
			continue
		}
		_, _ = bw.Write(k)
		_, _ = bw.WriteString(": ")
		_, _ = bw.Write(h.Raw[fl.V0:fl.V1])
		_, _ = bw.WriteString("\r\n")
	}
}

// Value returns the value of the first end-to-end field named name (canonical form) and whether
// there is one.
func (h *Head) Value(name string) ([]byte, bool) {
	for _, fl := range h.Fields {
		k := h.Raw[fl.K0:fl.K1]
		if string(k) == name && !h.hop(k) {
			return h.Raw[fl.V0:fl.V1], true
		}
	}
	return nil, false
}

// hop reports whether the field named k is hop-by-hop: a response header that describes the
// upstream connection, or one its Connection header names. Such fields are not relayed.
func (h *Head) hop(k []byte) bool { return hopResponseName(k) || h.connListedName(k) }

// hopResponseName reports whether k names a response header that describes the upstream
// connection.
func hopResponseName(k []byte) bool {
	switch string(k) {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// connListedName reports whether the response's Connection header names k.
func (h *Head) connListedName(k []byte) bool {
	for _, i := range h.Conn {
		fl := h.Fields[i]
		v := h.Raw[fl.V0:fl.V1]
		for len(v) > 0 {
			var item []byte
			item, v, _ = bytes.Cut(v, []byte{','})
			if bytes.EqualFold(bytes.Trim(item, " \t"), k) {
				return true
			}
		}
	}
	return false
}
