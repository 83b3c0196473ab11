package discovery

import (
	"strings"

	"github.com/coxswain-labs/coxswain/controller/translator"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// A ListenerSet's generation is gated like a Gateway's: it has its own entry in
// Snapshot.gateways and its listeners a second Server.sources entry under that name
// (translator.ListenerSetGatewayName). A dedicated proxy serves the ListenerSets of its Gateway.

var listenerSetPrefix = translator.ListenerSetGatewayName("")

// listenerSetParents maps every ListenerSet entry of snap to the Gateway whose listeners carry its
// listeners: the two are named by the sources of the same servers.
func listenerSetParents(snap *irv1.Snapshot) map[gwKey]gwKey {
	out := map[gwKey]gwKey{}
	for _, l := range snap.GetListeners() {
		for _, sv := range l.GetServers() {
			var sets []gwKey
			var parent *gwKey
			for _, src := range sv.GetSources() {
				parts := strings.SplitN(src, "/", 3)
				if len(parts) < 3 {
					continue
				}
				k := gwKey{parts[0], parts[1]}
				if strings.HasPrefix(k.name, listenerSetPrefix) {
					sets = append(sets, k)
				} else if parent == nil {
					parent = &k
				}
			}
			if parent == nil {
				continue
			}
			for _, k := range sets {
				out[k] = *parent
			}
		}
	}
	return out
}
