package translator

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// translation is the state of one Translate call.
type translation struct {
	ctx      context.Context
	store    *Store
	opts     Options
	now      metav1.Time
	problems map[string]*Problem
}

// parentState is the status being assembled for one parentRef of one route.
type parentState struct {
	dropped map[int]string
}

func newTranslation(ctx context.Context, store *Store, opts Options) *translation {
	if opts.ControllerName == "" {
		opts.ControllerName = DefaultControllerName
	}
	if opts.Registry == nil {
		opts.Registry = core.Freeze()
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if opts.Now != nil {
		now = opts.Now()
	}
	if store == nil {
		store = &Store{}
	}
	return &translation{ctx: ctx, store: store, opts: opts, now: now, problems: map[string]*Problem{}}
}

func (t *translation) problem(key RouteKey, field, reason, msg string) {
	p := &Problem{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name, Field: field, Reason: reason, Message: msg}
	t.problems[p.Error()] = p
}

func (p *parentState) dropRule(rule int, reason gwapiv1.RouteConditionReason, msg string) {
	if p.dropped == nil {
		p.dropped = map[int]string{}
	}
	p.dropped[rule] = msg
}

func (p *parentState) fail(cond gwapiv1.RouteConditionType, reason gwapiv1.RouteConditionReason, msg string) {}

func (t *translation) resolveBackend(key RouteKey, ref gwapiv1.BackendObjectReference) (string, gwapiv1.RouteConditionReason, error) {
	return "", gwapiv1.RouteReasonBackendNotFound, errors.New("not implemented")
}

func (t *translation) run() *Result {
	res := &Result{
		Snapshot:       &irv1.Snapshot{},
		GatewayClasses: map[types.NamespacedName]*gwapiv1.GatewayClassStatus{},
		Gateways:       map[types.NamespacedName]*gwapiv1.GatewayStatus{},
		HTTPRoutes:     map[types.NamespacedName]*gwapiv1.HTTPRouteStatus{},
		Routes:         map[RouteKey]*gwapiv1.RouteStatus{},
	}
	_ = irv1.Seal(res.Snapshot)
	return res
}
