package adminapi

import (
	"net/http"

	"k8s.io/apimachinery/pkg/types"

	"github.com/coxswain-labs/coxswain/core/admin"
)

// Manifests is GET /api/v1/manifests/{namespace}/{gateway}.
type Manifests struct {
	Gateway ObjectRef `json:"gateway"`
	// Mode is "shared", "dedicated", or "none" when the controller provisions nothing for it.
	Mode    string           `json:"mode"`
	Objects []map[string]any `json:"objects"`
}

// ManifestSource gives the objects provisioning applied for a Gateway (by UID), and whether
// provisioning is on at all.
type ManifestSource interface {
	Manifests(uid types.UID) []map[string]any
	Provisions() bool
}

// RegisterManifests adds GET /api/v1/manifests/{namespace}/{gateway} to mux.
func RegisterManifests(mux *http.ServeMux, latest *Latest, src ManifestSource) {
	mux.HandleFunc("GET /api/v1/manifests/{namespace}/{gateway}", func(w http.ResponseWriter, r *http.Request) {
		t := latest.Load()
		if t == nil || t.Store == nil || t.Result == nil {
			admin.WriteError(w, http.StatusServiceUnavailable, "this replica has not translated yet: it is not the leader, or its caches are still syncing")
			return
		}
		ns, name := r.PathValue("namespace"), r.PathValue("gateway")
		for _, g := range ourGateways(t) {
			if g.Namespace != ns || g.Name != name {
				continue
			}
			out := Manifests{Gateway: ObjectRef{Kind: "Gateway", Namespace: ns, Name: name, UID: string(g.UID)}, Mode: "none",
				Objects: src.Manifests(g.UID)}
			if src.Provisions() {
				out.Mode = "shared"
				for _, o := range out.Objects {
					if o["kind"] == "Deployment" {
						out.Mode = "dedicated"
					}
				}
			}
			admin.WriteJSON(w, out)
			return
		}
		admin.WriteError(w, http.StatusNotFound, "no Gateway "+ns+"/"+name+" of ours in the latest translation")
	})
}
