package discovery

import (
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Serving implements controller.ServingPublisher: every connected proxy has acknowledged the
// snapshot last sent to it, and pred holds for each of those snapshots. With no proxy connected
// nothing serves anything, so it is false. The ACME client asks it before telling the CA that
// a challenge is ready.
func (t *term) Serving(pred func(*irv1.Snapshot) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.sessions) == 0 {
		return false
	}
	for _, sess := range t.sessions {
		if sess.last == nil || sess.last.snap == nil || sess.acked.version != sess.last.version || !pred(sess.last.snap) {
			return false
		}
	}
	return true
}
