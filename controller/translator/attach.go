package translator

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// routeState is one route object while it is translated. Rule problems are properties of the
// route, not of a parent, so every parent's status reports them alike.
type routeState struct {
	kind  translation.RouteKind
	route translation.Route
	meta  metav1.Object
	key   RouteKey
	gk    gwapiv1.RouteGroupKind
	// hostnames are the route's valid hostnames; hasHostnames says it named any at all, so a
	// route whose names are all invalid does not become a catch-all.
	hostnames    []string
	hasHostnames bool

	dropped    map[int]string // rule index → why (DropRule and FailRule)
	failed     map[int]bool   // rules kept as error answers (FailRule)
	dropFirst  gwapiv1.RouteConditionReason
	unresolved *condState
	// unresolvedFields are the distinct fields with unresolved references, for the message.
	unresolvedFields map[string]bool
	// implemented counts the entries of rules neither dropped nor failed (validation pass).
	implemented int

	parents []*parentStatus
	// placedOn are the listeners the route is placed on (a route is on a few, so a slice);
	// placedBuf holds the first, parentBuf the first parent's status and parentsBuf the pointer
	// to it, so that most routes need no allocation of their own for these.
	placedOn   []*listenerState
	placedBuf  [1]*listenerState
	parentBuf  parentStatus
	parentsBuf [1]*parentStatus
	// attachments are the route's attachments, one per listener of placedOn (carry.go).
	attachments   []*attachment
	attachmentBuf [1]*attachment
	// problems wait until the route turns out to have one of our parents: a route of another
	// controller is none of our business.
	problems []*Problem
	// warnings are what was accepted but not served as written (RouteContext.Warn), by
	// "field: message", each once.
	warnings map[string]*Problem

	// memo is the route's record for an Incremental, rec the record of the Build under way;
	// fresh says this translation built or attached the route anew rather than replaying all
	// of it (statusmemo.go); carryEpoch is the latest translation that carried the state over
	// from the one before (carry.go); goneEpoch a translation given Changes that left the
	// state out (the changes named the route, or it could not be carried: changes.go).
	memo                  *routeMemo
	rec                   *buildRecord
	fresh                 bool
	carryEpoch, goneEpoch uint64
	// statusSeq is the latest statusHandOver.seq that looked at the route's status.
	statusSeq uint64
	// kept says the state is in the Incremental's kept set (keep.go); noKeep that its
	// attachment was made anew and cannot be replayed; kindIdx is its kind's place in the
	// route pass's order.
	kept    bool
	noKeep  bool
	kindIdx int
}

// parentStatus is the status of one of our parentRefs.
type parentStatus struct {
	ref      gwapiv1.ParentReference
	accepted condState
	// shadowed says where an older route of an ExclusiveKind takes this route's traffic.
	shadowed []string
	// listeners counts the listeners this parentRef placed the route on; kindConflicts says
	// which of them an older route of the other kind took (HTTPRoute/GRPCRoute, kindconflict.go).
	listeners     int
	kindConflicts []kindConflict
}

func (ps *parentStatus) shadow(msg string) {
	for _, m := range ps.shadowed {
		if m == msg {
			return
		}
	}
	ps.shadowed = append(ps.shadowed, msg)
}

// attachment is a route placed on a programmed listener, with the entries built for it.
type attachment struct {
	route     *routeState
	parent    *parentStatus
	hostnames []string
	entries   []*translation.Entry
}

func (st *routeState) problem(field string, reason gwapiv1.RouteConditionReason, msg string) {
	st.problems = append(st.problems, &Problem{Kind: st.key.Kind, Namespace: st.key.Namespace, Name: st.key.Name,
		Field: field, Reason: string(reason), Message: msg})
}

func (st *routeState) invalidRule(rule int, keep bool, field string, reason gwapiv1.RouteConditionReason, msg string) {
	st.problem(field, reason, msg)
	if st.dropped == nil {
		st.dropped, st.failed = map[int]string{}, map[int]bool{}
	}
	if _, ok := st.dropped[rule]; !ok {
		st.dropped[rule] = field + ": " + msg
	}
	if keep {
		st.failed[rule] = true
	}
	if st.dropFirst == "" {
		st.dropFirst = reason
	}
}

func (st *routeState) unresolvedRef(field string, reason gwapiv1.RouteConditionReason, msg string) {
	st.problem(field, reason, msg)
	if st.unresolved == nil {
		st.unresolved = &condState{reason: string(reason), msg: field + ": " + msg}
		st.unresolvedFields = map[string]bool{}
	}
	st.unresolvedFields[field] = true
}

func (st *routeState) warn(field, msg string) {
	p := &Problem{Kind: st.key.Kind, Namespace: st.key.Namespace, Name: st.key.Name, Field: field, Reason: ReasonWarning, Message: msg}
	if st.warnings == nil {
		st.warnings = map[string]*Problem{}
	}
	st.warnings[field+": "+msg] = p
}

// warningSummary joins the route's warnings, sorted, for its ResolvedRefs message.
func (st *routeState) warningSummary() string {
	keys := make([]string, 0, len(st.warnings))
	for k := range st.warnings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, "; ")
}

// noValidRule reports whether every rule was dropped or failed.
func (st *routeState) noValidRule() bool { return st.implemented == 0 && len(st.dropped) > 0 }

// keep reports whether an entry of rule belongs in the table.
func (st *routeState) keep(rule int) bool {
	_, dropped := st.dropped[rule]
	return !dropped || st.failed[rule]
}

func (t *session) translateRoutes() {
	if t.keepRoutes() { // keep.go
		return
	}
	for _, k := range t.kinds {
		api := k.API()
		gk := normalGroupKind(api.GroupKind())
		sts, delta := t.deltaRoutes(k, api.GVK.GroupKind(), gk) // changes.go
		if !delta {
			sts = t.routeStates(k, api.GVK.GroupKind(), gk)
		}
		if t.kindLists != nil {
			t.kindLists[api.GVK.GroupKind()] = &kindList{sts: sts}
			if delta {
				t.kindLists[api.GVK.GroupKind()].byName = t.delta.lists[api.GVK.GroupKind()].byName
			}
		}
		var epoch uint64
		if t.memo != nil {
			epoch = t.memo.epoch
		}
		t.routes = slices.Grow(t.routes, len(sts)) // growing by doubling: a third of a change's bytes
		for _, st := range sts {
			if t.memo != nil && st.carryEpoch == epoch {
				t.carry(st)
			} else {
				t.validateRoute(st)
				t.setRouteHostnames(st)
				t.attachRoute(st, st.route)
			}
			if len(st.parents) > 0 {
				t.routes = append(t.routes, st)
				if t.handOver != nil && st.carryEpoch != epoch {
					t.uncarried = append(t.uncarried, st) // statuschanges.go
				}
				for _, p := range st.warnings {
					t.warnings[p.Error()] = p
				}
				for _, p := range st.problems {
					t.problems[p.Error()] = p
				}
			}
		}
		if t.delta != nil && !delta {
			t.delta.tookFullPath(k, sts, epoch)
		}
	}
	if t.memo != nil && t.kindLists != nil {
		t.kept = t.rebuildKept()
	}
}

// routeStates are the states of the Store's routes of kind k in age order, those of routes
// wholly replayed in the previous translation carried over (carry.go).
func (t *session) routeStates(k translation.RouteKind, kgk schema.GroupKind, gk gwapiv1.RouteGroupKind) []*routeState {
	rs := t.routesOf(k, kgk)
	sts := make([]*routeState, len(rs))
	var epoch uint64
	if t.memo != nil {
		epoch = t.memo.epoch
	}
	var fresh []translation.Route
	if t.memo != nil {
		carried := 0
		for i, r := range rs {
			if st := t.carried(k, kgk, r); st != nil { // carry.go
				st.carryEpoch, st.memo.cur, st.memo.curEpoch = epoch, st, epoch
				sts[i] = st
				carried++
			}
		}
		fresh = make([]translation.Route, 0, len(rs)-carried)
		for i, r := range rs {
			if sts[i] == nil {
				fresh = append(fresh, r)
			}
		}
	} else {
		fresh = rs
	}
	made := t.newRouteStates(k, gk, fresh)
	for i := range sts {
		if sts[i] == nil {
			sts[i], made = made[0], made[1:]
		}
	}
	t.ages.sort(kgk, sts, epoch)
	return sts
}

// newRouteStates makes the states of routes rs of kind k, with their records for an
// Incremental, in one allocation of the exact size: a carried state keeps its allocation
// alive, so a chunk of spare ones would stay with it.
func (t *session) newRouteStates(k translation.RouteKind, gk gwapiv1.RouteGroupKind, rs []translation.Route) []*routeState {
	states := make([]routeState, len(rs))
	sts := make([]*routeState, len(rs))
	rank := t.kindRank(k)
	for i, r := range rs {
		m := r.Object()
		st := &states[i]
		*st = routeState{kind: k, route: r, meta: m, gk: gk, kindIdx: rank, key: RouteKey{
			Group: string(*gk.Group), Kind: string(gk.Kind), Namespace: m.GetNamespace(), Name: m.GetName(),
		}}
		if t.memo != nil {
			rm := t.memo.memoOf(st)
			if rm.curEpoch == t.memo.epoch {
				rm.dupEpoch = t.memo.epoch
			}
			rm.cur, rm.curEpoch = st, t.memo.epoch
			st.memo = rm
		}
		sts[i] = st
	}
	return sts
}

// routesOf wraps the store's objects of route kind k. An object of another Go type (a store
// filled by hand with the wrong type) is a Problem, not a panic.
func (t *session) routesOf(k translation.RouteKind, gk schema.GroupKind) []translation.Route {
	objs := t.store.Objects[gk]
	out := make([]translation.Route, 0, len(objs))
	for _, o := range objs {
		r, ok := k.Route(o)
		if !ok {
			t.problem(gk.Kind, o.GetNamespace(), o.GetName(), "", "InvalidObject", fmt.Sprintf("the store holds a %T, not the Go type of %s", o, gk))
			continue
		}
		out = append(out, r)
	}
	return out
}

// validateRoute runs Build once without a listener, so every problem of the route is known
// before attachment decides Accepted.
func (t *session) validateRoute(st *routeState) {
	var rec *buildRecord
	if st.memo != nil {
		rec = st.memo.validate
	}
	if rec != nil { // a replay, which needs no routeContext
		t.memo.reused++
		n, _ := t.replay(st, rec)
		st.implemented += n
		return
	}
	n, _ := t.build(&routeContext{t: t, st: st}, &rec, nil)
	st.implemented += n
	if st.memo != nil {
		st.memo.validate = rec
	}
}

// attach resolves one parentRef: which of the Gateway's listeners it selects (sectionName,
// port), which of those admit the route (allowedRoutes kinds and namespaces), and which share a
// hostname with it. References to anything but our Gateways are another controller's business.
func (t *session) attach(st *routeState, index int, ref gwapiv1.ParentReference) {
	ref = defaultParentRef(ref)
	if *ref.Group != gwapiv1.GroupName {
		return
	}
	ns := st.key.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	var parent string
	var candidates []*listenerState
	ps := &parentStatus{ref: ref}
	switch *ref.Kind {
	case "Gateway":
		g := t.gwByKey[nn(ns, string(ref.Name))]
		if g == nil {
			return
		}
		parent, candidates = "Gateway "+g.key.String(), g.ownListeners()
	case listenerSetKind:
		ls := t.lsByKey[nn(ns, string(ref.Name))]
		if ls == nil {
			return // not a ListenerSet of our Gateways
		}
		parent, candidates = "ListenerSet "+ls.key.String(), ls.listeners
		if !ls.accepted.ok {
			ps.accepted = condState{reason: string(gwapiv1.RouteReasonNoMatchingParent), msg: "the ListenerSet is not accepted: " + ls.accepted.msg}
		}
	default:
		return
	}
	st.parents = append(st.parents, ps)
	var pr *parentRecord
	if r := t.attachRec; r != nil {
		pr = &parentRecord{}
		r.parents = append(r.parents, pr)
		t.placing = pr
	}
	if ps.accepted.reason == "" {
		t.attachParent(st, ps, fmt.Sprintf("spec.parentRefs[%d]", index), candidates)
	}
	if pr != nil {
		pr.ref, pr.accepted, t.placing = ps.ref, ps.accepted, nil
	}
	if !ps.accepted.ok && !st.noValidRule() { // invalid rules are reported each by itself
		field, msg := splitFieldPrefix(fmt.Sprintf("spec.parentRefs[%d]", index), ps.accepted.msg)
		st.problem(field, gwapiv1.RouteConditionReason(ps.accepted.reason), fmt.Sprintf("not accepted by %s: %s", parent, msg))
		if r := t.attachRec; r != nil {
			r.problems = append(r.problems, st.problems[len(st.problems)-1])
		}
	}
}

// attachParent decides the Accepted condition of one parentRef and places the route on the
// listeners that take it, among the parent's listeners: a Gateway's own, or a ListenerSet's.
// field is the parentRef's path (spec.parentRefs[i]), named in the condition when none matches.
func (t *session) attachParent(st *routeState, ps *parentStatus, field string, listeners []*listenerState) {
	ref := ps.ref

	var selected []*listenerState
	named := false // some listener has the sectionName: then the port is what matches none
	for _, l := range listeners {
		if ref.SectionName != nil && *ref.SectionName != l.spec.Name {
			continue
		}
		named = true
		if ref.Port != nil && *ref.Port != l.spec.Port {
			continue
		}
		selected = append(selected, l)
	}
	if len(selected) == 0 {
		ps.accepted = condState{reason: string(gwapiv1.RouteReasonNoMatchingParent),
			msg: unmatchedParentField(field, ref, named) + "no listener matches the parentRef's sectionName and port"}
		return
	}
	var allowed []*listenerState
	for _, l := range selected {
		if containsGroupKind(l.supportedKinds, st.gk) && t.namespaceAllowed(l, st.key.Namespace) {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		ps.accepted = condState{reason: string(gwapiv1.RouteReasonNotAllowedByListeners), msg: "no selected listener allows this route's kind and namespace"}
		return
	}
	type match struct {
		l     *listenerState
		hosts []string
	}
	var matched []match
	for _, l := range allowed {
		if st.hasHostnames && len(st.hostnames) == 0 {
			break
		}
		if hosts, ok := EffectiveHostnames(l.hostname, st.hostnames); ok {
			matched = append(matched, match{l, hosts})
		}
	}
	if len(matched) == 0 {
		ps.accepted = condState{reason: string(gwapiv1.RouteReasonNoMatchingListenerHostname), msg: "no selected listener hostname intersects the route's hostnames"}
		return
	}
	if st.noValidRule() {
		ps.accepted = condState{reason: string(st.dropFirst), msg: "no valid rule: " + st.droppedSummary()}
		return
	}
	ps.accepted = condState{ok: true, reason: string(gwapiv1.RouteReasonAccepted), msg: "Route is accepted"}
	for _, m := range matched {
		t.place(st, ps, m.l, m.hosts)
	}
}

// place attaches an accepted route to a listener once, and builds its entries when the
// listener is programmed.
func (t *session) place(st *routeState, ps *parentStatus, l *listenerState, hosts []string) {
	if pr := t.placing; pr != nil {
		pr.places = append(pr.places, placeRecord{listener: t.placeIDOf(l), hosts: hosts})
	}
	if slices.Contains(st.placedOn, l) {
		return // placed there already, by another parentRef
	}
	if st.placedOn == nil {
		st.placedOn = st.placedBuf[:0]
	}
	st.placedOn = append(st.placedOn, l)
	l.attached++
	ps.listeners++
	a := t.newAttachment()
	*a = attachment{route: st, parent: ps, hostnames: hosts}
	t.appendRoute(l, a)
	if st.attachments == nil {
		st.attachments = st.attachmentBuf[:0]
	}
	st.attachments = append(st.attachments, a)
	if !l.programmed() {
		return
	}
	var rec *buildRecord
	var k placeID
	if st.memo != nil {
		k = t.placeIDOf(l)
		if rec = st.memo.placeRecordOf(k); rec != nil {
			t.memo.reused++
			_, a.entries = t.replay(st, rec)
			return
		}
	}
	rc := &routeContext{t: t, st: st, emit: true, ls: l, listener: translation.ListenerInfo{
		Gateway:  l.gw.key.String(),
		Name:     l.spec.Name,
		Protocol: l.spec.Protocol,
		Port:     uint32(l.spec.Port),
		Hostname: l.hostname,
	}}
	_, a.entries = t.build(rc, &rec, func(e *translation.Entry) bool {
		if st.keep(e.Rule) && e.Route != nil {
			e.Route.Name = fmt.Sprintf("%s/%s/%s/rule/%d/match/%d", st.key.Kind, st.key.Namespace, st.key.Name, e.Rule, e.Match)
			return true
		}
		return false
	})
	if st.memo != nil && rec != nil {
		st.memo.setPlaceRecord(k, rec)
	}
}

// newAttachment allocates attachments in chunks: one each was a tenth of an incremental
// translation's allocations. The chunks double from one up to 256, so that a translation that
// makes few attachments (the others are carried, carry.go) allocates no spare ones that the
// carried attachments would keep alive with them.
func (t *session) newAttachment() *attachment {
	if len(t.attachSlab) == cap(t.attachSlab) {
		t.attachSlab = make([]attachment, 0, min(max(2*cap(t.attachSlab), 1), 256))
	}
	t.attachSlab = t.attachSlab[:len(t.attachSlab)+1]
	return &t.attachSlab[len(t.attachSlab)-1]
}

// newParent is a new parent status of st: the first one inside st itself.
func (st *routeState) newParent(ps parentStatus) *parentStatus {
	if len(st.parents) == 0 && st.parents == nil {
		st.parentBuf = ps
		st.parents = st.parentsBuf[:1]
		st.parents[0] = &st.parentBuf
		return &st.parentBuf
	}
	p := &ps
	st.parents = append(st.parents, p)
	return p
}

func (st *routeState) droppedSummary() string {
	rules := make([]int, 0, len(st.dropped))
	for r := range st.dropped {
		rules = append(rules, r)
	}
	sort.Ints(rules)
	answer := "500"
	if ek, ok := st.kind.(translation.ErrorAnswerKind); ok {
		answer = ek.ErrorAnswer()
	}
	parts := make([]string, 0, len(rules))
	for _, r := range rules {
		how := ""
		if st.failed[r] {
			how = " (it answers " + answer + ")"
		}
		parts = append(parts, fmt.Sprintf("Dropped Rule %d%s: %s", r, how, st.dropped[r]))
	}
	return strings.Join(parts, "; ")
}

// namespaceAllowed applies the listener's allowedRoutes.namespaces (default: Same).
func (t *session) namespaceAllowed(l *listenerState, routeNS string) bool {
	from := gwapiv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwapiv1.NamespacesFromAll:
		return true
	case gwapiv1.NamespacesFromSame:
		return routeNS == l.namespace()
	case gwapiv1.NamespacesFromSelector:
		if sel == nil {
			return false
		}
		if l.selector == nil && !l.selectorErr {
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil {
				l.selectorErr = true
				t.listenerProblem(l, "allowedRoutes.namespaces.selector", gwapiv1.ListenerReasonUnsupportedValue, err.Error())
				return false
			}
			l.selector = s
		}
		if l.selectorErr {
			t.attachNotReplayable = true // the listener's problem is reported only where it is evaluated
		}
		return !l.selectorErr && l.selector.Matches(labels.Set(t.namespaceLabels(routeNS)))
	}
	return false
}

// defaultParentRef fills group and kind as the API server's defaulting would, so the status
// echoes the reference the same way in both modes.
func defaultParentRef(ref gwapiv1.ParentReference) gwapiv1.ParentReference {
	if ref.Group == nil {
		g := gwapiv1.Group(gwapiv1.GroupName)
		ref.Group = &g
	}
	if ref.Kind == nil {
		k := gwapiv1.Kind("Gateway")
		ref.Kind = &k
	}
	return ref
}

// setRouteHostnames sets st's hostnames, from its record when an Incremental has one: they
// depend on the route object alone.
func (t *session) setRouteHostnames(st *routeState) {
	if m := st.memo; m != nil && m.hosts != nil {
		st.hostnames, st.hasHostnames = m.hosts.hostnames, m.hosts.hasHostnames
		st.problems = append(st.problems, m.hosts.problems...)
		return
	}
	before := len(st.problems)
	st.fresh = true
	st.hostnames = t.routeHostnames(st)
	if m := st.memo; m != nil {
		m.hosts = &memoHosts{hostnames: st.hostnames, hasHostnames: st.hasHostnames, problems: slices.Clone(st.problems[before:])}
	}
}

// routeHostnames validates the route's hostnames as CEL would (DNS names, an optional leading
// "*." label, no IP addresses); invalid ones are reported and ignored.
func (t *session) routeHostnames(st *routeState) []string {
	hs := st.route.Hostnames()
	st.hasHostnames = len(hs) > 0
	var out []string
	for i, h := range hs {
		if err := validListenerHostname(string(h)); err != "" || h == "" {
			if err == "" {
				err = "hostname is empty"
			}
			st.problem(fmt.Sprintf("spec.hostnames[%d]", i), gwapiv1.RouteReasonUnsupportedValue, err)
			continue
		}
		out = append(out, string(h))
	}
	return out
}

// unmatchedParentField names the part of a parentRef that selects no listener, as the
// "field: " prefix of its condition: the sectionName when no listener has that name, else the
// port; the whole parentRef when neither is set (the parent has no listeners at all).
func unmatchedParentField(field string, ref gwapiv1.ParentReference, named bool) string {
	switch {
	case ref.SectionName != nil && !named:
		return fmt.Sprintf("%s.sectionName: listener %q not found; ", field, *ref.SectionName)
	case ref.SectionName != nil && ref.Port != nil:
		return fmt.Sprintf("%s.port: listener %q is not on port %d; ", field, *ref.SectionName, *ref.Port)
	case ref.Port != nil:
		return fmt.Sprintf("%s.port: no listener on port %d; ", field, *ref.Port)
	}
	return field + ": "
}
