package proxy

import (
	"net/http"
)

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

func sameKey(k string) string { return k }

// h2cSkip are the request headers never forwarded as they are: connection-specific ones
// (forbidden in HTTP/2), Host (sent as :authority), and the forwarding headers the engine sets
// itself.
var h2cSkip = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Transfer-Encoding": true, "Upgrade": true, "Host": true, "Te": true, "Content-Length": true,
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true}

// h2cHopByHop are the response headers never copied to the client.
var h2cHopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}
