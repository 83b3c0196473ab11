package status

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// obj stands for an object with a resourceVersion and a status.
type obj struct {
	rv     int
	status string
}

// server is a tiny optimistic-concurrency store: a put must carry the current resourceVersion.
type server struct {
	cur   obj
	gets  int
	puts  int
	fails error // returned by every put when set
}

func (s *server) get(context.Context) (obj, error) { s.gets++; return s.cur, nil }

func (s *server) put(_ context.Context, o obj) error {
	s.puts++
	if s.fails != nil {
		return s.fails
	}
	if o.rv != s.cur.rv {
		return apierrors.NewConflict(schema.GroupResource{Resource: "things"}, "x", errors.New("stale"))
	}
	s.cur = obj{rv: s.cur.rv + 1, status: o.status}
	return nil
}

func TestUpdate(t *testing.T) {
	want := func(o obj) (obj, bool) {
		if o.status == "desired" {
			return o, false
		}
		return obj{rv: o.rv, status: "desired"}, true
	}
	tests := []struct {
		name      string
		cached    obj
		srv       server
		wantWrote bool
		wantErr   bool
		wantGets  int
	}{
		{name: "unchanged: no write, no read", cached: obj{1, "desired"}, srv: server{cur: obj{1, "desired"}}},
		{name: "fresh cache: one write", cached: obj{1, "old"}, srv: server{cur: obj{1, "old"}}, wantWrote: true},
		{name: "stale cache: conflict, re-read, write", cached: obj{1, "old"}, srv: server{cur: obj{2, "other"}},
			wantWrote: true, wantGets: 1},
		{name: "stale cache, already desired upstream: no write", cached: obj{1, "old"}, srv: server{cur: obj{2, "desired"}},
			wantGets: 1},
		{name: "object gone: not an error", cached: obj{1, "old"},
			srv: server{cur: obj{1, "old"}, fails: apierrors.NewNotFound(schema.GroupResource{Resource: "things"}, "x")}},
		{name: "other errors surface", cached: obj{1, "old"}, srv: server{cur: obj{1, "old"}, fails: errors.New("boom")},
			wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv
			wrote, err := update(context.Background(), tc.cached, srv.get, want, srv.put)
			if (err != nil) != tc.wantErr || wrote != tc.wantWrote || srv.gets != tc.wantGets {
				t.Fatalf("wrote=%v err=%v gets=%d; want wrote=%v err=%v gets=%d", wrote, err, srv.gets, tc.wantWrote, tc.wantErr, tc.wantGets)
			}
			if tc.wantWrote && srv.cur.status != "desired" {
				t.Fatalf("server holds %+v", srv.cur)
			}
		})
	}
}
