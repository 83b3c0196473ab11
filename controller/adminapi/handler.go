package adminapi

import (
	"encoding/json"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/core/admin"
)

// RegisterTranslation adds /api/v1/routing, /api/v1/routing/{namespace}/{gateway} and
// /api/v1/problems to mux, served from latest. notYet is the 503 message before a translation
// (a standby controller, or serve before its first load).
func RegisterTranslation(mux *http.ServeMux, latest *Latest, notYet string) {
	with := func(f func(w http.ResponseWriter, r *http.Request, t *Translation)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			t := latest.Load()
			if t == nil || t.Result == nil || t.Store == nil {
				admin.WriteError(w, http.StatusServiceUnavailable, notYet)
				return
			}
			f(w, r, t)
		}
	}
	mux.HandleFunc("GET /api/v1/routing", with(func(w http.ResponseWriter, _ *http.Request, t *Translation) {
		admin.WriteJSON(w, Index(t))
	}))
	mux.HandleFunc("GET /api/v1/routing/{namespace}/{gateway}", with(func(w http.ResponseWriter, r *http.Request, t *Translation) {
		ns, name := r.PathValue("namespace"), r.PathValue("gateway")
		g, ok := Gateway(t, ns, name)
		if !ok {
			admin.WriteError(w, http.StatusNotFound, "no Gateway "+ns+"/"+name+" of ours in the latest translation")
			return
		}
		admin.WriteJSON(w, g)
	}))
	mux.HandleFunc("GET /api/v1/problems", with(func(w http.ResponseWriter, _ *http.Request, t *Translation) {
		admin.WriteJSON(w, ProblemsOf(t))
	}))
}

// protoRaw is m as protojson with the proto field names; nil for an unset message.
func protoRaw(m proto.Message) json.RawMessage {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil
	}
	return json.RawMessage(b)
}
