package translate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	headerstr "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/mirror"
	mirrortr "github.com/coxswain-labs/coxswain/modules/filters/mirror/translate"
	grpctranslate "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// TestMirrorOnGRPCRoute: with the RequestMirror translator compiled in, a GRPCRoute's mirror is
// served, to the h2c cluster of the mirror Service (the same one its backendRefs use).
func TestMirrorOnGRPCRoute(t *testing.T) {
	res, err := standalone.Load(context.Background(), "testdata/grpc.yaml", nil)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("load: %v %v", err, res.Err())
	}
	reg := core.NewRegistry(httptranslate.Kind{}, grpctranslate.Kind{}, headerstr.Request{}, headerstr.Response{}, mirrortr.Translator{})
	tr := translator.Translate(context.Background(), res.Store, translator.Options{Registry: reg})
	var cfg *mirror.Config
	for _, l := range tr.Snapshot.GetListeners() {
		for _, s := range l.GetServers() {
			for _, vh := range s.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					for _, f := range r.GetFilters() {
						if f.GetId() == mirror.ModuleID {
							cfg = new(mirror.Config)
							if err := json.Unmarshal(f.GetJson(), cfg); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
		}
	}
	if cfg == nil {
		t.Fatal("no route of the snapshot has the mirror filter")
	}
	if cfg.Cluster != "default/h2c:50051" || cfg.Route != "GRPCRoute/default/echo" {
		t.Errorf("mirror config %+v, want cluster default/h2c:50051 of GRPCRoute/default/echo", cfg)
	}
	var proto irv1.Cluster_Protocol = -1
	for _, c := range tr.Snapshot.GetClusters() {
		if c.GetName() == cfg.Cluster {
			proto = c.GetProtocol()
		}
	}
	if proto != irv1.Cluster_H2C {
		t.Errorf("mirror cluster protocol %v, want H2C", proto)
	}
}
