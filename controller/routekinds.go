package controller

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
)

// routeWatch is one watched route kind: its informer, how its objects fill a Store, and how the
// status writer reads and writes it.
type routeWatch struct {
	kind     string
	informer cache.SharedIndexInformer
	fill     func(*translator.Store) error
	status   status.Routes
}

// routeKind is a route kind the controller knows how to watch.
type routeKind struct {
	// resource is the plural in gateway.networking.k8s.io/v1, looked up in discovery.
	resource string
	watch    func(f gwinformers.SharedInformerFactory, c gwclientset.Interface) routeWatch
}

// knownRouteKinds are the route kinds the controller can watch, by Kind. Which of them it does
// watch depends on the build (its translate.route.* modules) and the cluster (the served CRDs).
var knownRouteKinds = map[string]routeKind{
	"HTTPRoute": {"httproutes", func(f gwinformers.SharedInformerFactory, c gwclientset.Interface) routeWatch {
		return newRouteWatch("HTTPRoute", f.Gateway().V1().HTTPRoutes().Informer(),
			func(s *translator.Store, l []*gwapiv1.HTTPRoute) { s.HTTPRoutes = l },
			func(r *gwapiv1.HTTPRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus },
			func(ctx context.Context, ns, name string) (*gwapiv1.HTTPRoute, error) {
				return c.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(ctx context.Context, r *gwapiv1.HTTPRoute) error {
				_, err := c.GatewayV1().HTTPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
				return err
			})
	}},
	"GRPCRoute": {"grpcroutes", func(f gwinformers.SharedInformerFactory, c gwclientset.Interface) routeWatch {
		return newRouteWatch("GRPCRoute", f.Gateway().V1().GRPCRoutes().Informer(),
			func(s *translator.Store, l []*gwapiv1.GRPCRoute) { s.GRPCRoutes = l },
			func(r *gwapiv1.GRPCRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus },
			func(ctx context.Context, ns, name string) (*gwapiv1.GRPCRoute, error) {
				return c.GatewayV1().GRPCRoutes(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(ctx context.Context, r *gwapiv1.GRPCRoute) error {
				_, err := c.GatewayV1().GRPCRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
				return err
			})
	}},
	"TCPRoute": {"tcproutes", func(f gwinformers.SharedInformerFactory, c gwclientset.Interface) routeWatch {
		return newRouteWatch("TCPRoute", f.Gateway().V1().TCPRoutes().Informer(),
			func(s *translator.Store, l []*gwapiv1.TCPRoute) { s.TCPRoutes = l },
			func(r *gwapiv1.TCPRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus },
			func(ctx context.Context, ns, name string) (*gwapiv1.TCPRoute, error) {
				return c.GatewayV1().TCPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(ctx context.Context, r *gwapiv1.TCPRoute) error {
				_, err := c.GatewayV1().TCPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
				return err
			})
	}},
	"TLSRoute": {"tlsroutes", func(f gwinformers.SharedInformerFactory, c gwclientset.Interface) routeWatch {
		return newRouteWatch("TLSRoute", f.Gateway().V1().TLSRoutes().Informer(),
			func(s *translator.Store, l []*gwapiv1.TLSRoute) { s.TLSRoutes = l },
			func(r *gwapiv1.TLSRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus },
			func(ctx context.Context, ns, name string) (*gwapiv1.TLSRoute, error) {
				return c.GatewayV1().TLSRoutes(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(ctx context.Context, r *gwapiv1.TLSRoute) error {
				_, err := c.GatewayV1().TLSRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
				return err
			})
	}},
	"UDPRoute": {"udproutes", func(f gwinformers.SharedInformerFactory, c gwclientset.Interface) routeWatch {
		return newRouteWatch("UDPRoute", f.Gateway().V1().UDPRoutes().Informer(),
			func(s *translator.Store, l []*gwapiv1.UDPRoute) { s.UDPRoutes = l },
			func(r *gwapiv1.UDPRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus },
			func(ctx context.Context, ns, name string) (*gwapiv1.UDPRoute, error) {
				return c.GatewayV1().UDPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(ctx context.Context, r *gwapiv1.UDPRoute) error {
				_, err := c.GatewayV1().UDPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
				return err
			})
	}},
}

// newRouteWatch builds the routeWatch of route type E from its informer and four accessors; the
// cache reads go through the informer's indexer, so no typed lister is needed.
func newRouteWatch[E any, P interface {
	*E
	metav1.Object
}](
	kind string,
	inf cache.SharedIndexInformer,
	fill func(*translator.Store, []P),
	statusOf func(P) *gwapiv1.RouteStatus,
	get func(ctx context.Context, namespace, name string) (P, error),
	updateStatus func(context.Context, P) error,
) routeWatch {
	list := func() ([]P, error) {
		objs := inf.GetIndexer().List()
		out := make([]P, 0, len(objs))
		for _, o := range objs {
			r, ok := o.(P)
			if !ok {
				return nil, fmt.Errorf("%s cache holds a %T", kind, o)
			}
			out = append(out, r)
		}
		return out, nil
	}
	return routeWatch{
		kind:     kind,
		informer: inf,
		fill: func(s *translator.Store) error {
			l, err := list()
			fill(s, l)
			return err
		},
		status: status.RouteClient[P]{
			KindName: kind,
			Cached: func(namespace, name string) (P, error) {
				o, ok, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
				if err != nil || !ok {
					return nil, notFound(kind, name, err)
				}
				r, ok := o.(P)
				if !ok {
					return nil, fmt.Errorf("%s cache holds a %T", kind, o)
				}
				return r, nil
			},
			List:         list,
			Get:          get,
			UpdateStatus: updateStatus,
			Status: func(r P) (types.NamespacedName, gwapiv1.RouteStatus) {
				return types.NamespacedName{Namespace: r.GetNamespace(), Name: r.GetName()}, *statusOf(r)
			},
			WithStatus: func(r P, st gwapiv1.RouteStatus) P {
				c := P(new(E))
				*(*E)(c) = *(*E)(r) // a shallow copy: the cached object is never modified
				*statusOf(c) = st
				return c
			},
		},
	}
}

// routeKindsOf returns the Kinds of the translate.route.* modules of reg.
func routeKindsOf(reg *core.Registry) []string {
	var out []string
	for _, id := range reg.Namespace(translator.RouteKindNamespace) {
		info, _ := reg.Lookup(id)
		if k, ok := info.New().(translator.RouteKind); ok {
			out = append(out, string(k.GroupKind().Kind))
		}
	}
	return out
}

// errorAnswersOf says, per route kind of reg that implements translator.ErrorAnswerKind, what
// its clients get from a rule that answers the engine's error (status.Options.ErrorAnswers).
func errorAnswersOf(reg *core.Registry) map[string]string {
	out := map[string]string{}
	for _, id := range reg.Namespace(translator.RouteKindNamespace) {
		info, _ := reg.Lookup(id)
		if k, ok := info.New().(translator.ErrorAnswerKind); ok {
			out[string(k.GroupKind().Kind)] = k.ErrorAnswer()
		}
	}
	return out
}

func notFound(kind, name string, err error) error {
	if err != nil {
		return err
	}
	return apierrors.NewNotFound(gwapiv1.Resource(strings.ToLower(kind)+"s"), name)
}
