package adminapi

import (
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// Translation is one translation as the admin API shows it.
type Translation struct {
	Store  *translator.Store
	Result *translator.Result
	At     time.Time
	// Source names the file and line an object came from (serve); nil in a cluster.
	Source func(kind, namespace, name string) string
}

// Latest holds the newest Translation; the zero value holds none.
type Latest struct{ p atomic.Pointer[Translation] }

// Store makes t the newest; nil forgets it (a controller that stopped leading).
func (l *Latest) Store(t *Translation) { l.p.Store(t) }

// Load returns the newest Translation, nil before the first.
func (l *Latest) Load() *Translation { return l.p.Load() }
