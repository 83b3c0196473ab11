// Command dnsresponder stands in for the coredns image in the conformance harness. It reads a
// Corefile (-conf, as coredns does) and serves its server blocks over UDP and TCP, implementing
// the two plugins the conformance suite's Corefile uses: whoami answers with the client's
// address and port; forward cannot reach anything from the harness's private network, so its
// zones answer SERVFAIL. Every other query is REFUSED.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// block is one Corefile server block: its zones, port and plugins.
type block struct {
	zones   []string
	port    string
	plugins map[string]bool
}

func main() {
	conf := flag.String("conf", "Corefile", "the Corefile to serve")
	flag.Parse()
	f, err := os.Open(*conf)
	if err != nil {
		log.Fatal(err)
	}
	blocks, err := parseCorefile(f)
	f.Close()
	if err != nil {
		log.Fatalf("%s: %v", *conf, err)
	}
	ports := map[string][]*block{}
	for _, b := range blocks {
		ports[b.port] = append(ports[b.port], b)
	}
	errs := make(chan error, 2*len(ports))
	for port, bs := range ports {
		h := handler(bs)
		for _, network := range []string{"udp", "tcp"} {
			srv := &dns.Server{Addr: ":" + port, Net: network, Handler: h}
			go func() { errs <- srv.ListenAndServe() }()
		}
		fmt.Printf("serving %d server block(s) on :%s (udp, tcp)\n", len(bs), port)
	}
	log.Fatal(<-errs)
}

// handler picks, per question, the block with the longest zone that contains the name.
func handler(blocks []*block) dns.HandlerFunc {
	return func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if len(req.Question) != 1 {
			m.Rcode = dns.RcodeFormatError
			_ = w.WriteMsg(m)
			return
		}
		q := req.Question[0]
		b := match(blocks, q.Name)
		switch {
		case b == nil:
			m.Rcode = dns.RcodeRefused
		case b.plugins["whoami"]:
			m.Authoritative = true
			m.Extra = whoami(q.Name, w.RemoteAddr())
		default: // forward: no upstream is reachable from the harness
			m.Rcode = dns.RcodeServerFailure
		}
		if b != nil && b.plugins["log"] {
			fmt.Printf("%s %s %s %s\n", w.RemoteAddr(), dns.TypeToString[q.Qtype], q.Name, dns.RcodeToString[m.Rcode])
		}
		_ = w.WriteMsg(m)
	}
}

func match(blocks []*block, name string) *block {
	var best *block
	bestLen := -1
	for _, b := range blocks {
		for _, z := range b.zones {
			if dns.IsSubDomain(z, name) && len(z) > bestLen {
				best, bestLen = b, len(z)
			}
		}
	}
	return best
}

// whoami is coredns's whoami answer: the client's address as an A or AAAA record and its port
// and transport as an SRV record, in the additional section.
func whoami(name string, remote net.Addr) []dns.RR {
	var ip net.IP
	var port int
	proto := "udp"
	switch a := remote.(type) {
	case *net.UDPAddr:
		ip, port = a.IP, a.Port
	case *net.TCPAddr:
		ip, port, proto = a.IP, a.Port, "tcp"
	}
	var rr dns.RR
	if ip4 := ip.To4(); ip4 != nil {
		rr = &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: ip4}
	} else {
		rr = &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET}, AAAA: ip}
	}
	srv := &dns.SRV{
		Hdr:  dns.RR_Header{Name: "_" + proto + "." + name, Rrtype: dns.TypeSRV, Class: dns.ClassINET},
		Port: uint16(port), Target: ".",
	}
	return []dns.RR{rr, srv}
}

// parseCorefile reads server blocks: "zone[:port] ... {", one plugin per line, "}". Nested
// blocks inside a plugin are skipped.
func parseCorefile(r io.Reader) ([]*block, error) {
	var out []*block
	var cur *block
	depth := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		opens, closes := strings.HasSuffix(line, "{"), line == "}"
		switch {
		case depth == 0 && opens:
			b, err := newBlock(strings.Fields(strings.TrimSuffix(line, "{")))
			if err != nil {
				return nil, err
			}
			cur, depth = b, 1
			out = append(out, b)
		case depth == 0:
			return nil, fmt.Errorf("%q outside a server block", line)
		case closes:
			depth--
		case depth == 1:
			cur.plugins[strings.Fields(line)[0]] = true
			if opens {
				depth++
			}
		case opens:
			depth++
		}
	}
	if depth != 0 {
		return nil, errors.New("unbalanced braces")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].port < out[j].port })
	return out, sc.Err()
}

func newBlock(keys []string) (*block, error) {
	if len(keys) == 0 {
		return nil, errors.New("server block without a zone")
	}
	b := &block{port: "53", plugins: map[string]bool{}}
	for _, k := range keys {
		k = strings.TrimPrefix(k, "dns://")
		zone, port, found := strings.Cut(k, ":")
		if found && port != "" {
			b.port = port
		}
		b.zones = append(b.zones, dns.Fqdn(zone))
	}
	return b, nil
}
